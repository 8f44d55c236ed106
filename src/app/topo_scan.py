# tokenstorm topology --source: the static half of the dependency graph.
#
# Embedded in the tokenstorm binary and run as `python3 -I -S -c THIS ROOT
# MAX_FILES MAX_BYTES`. It reads every *.py file under ROOT with the standard
# ast module (nothing of the user's code is imported or executed) and writes
# one JSON document on stdout (docs/TOPOLOGY.md "The scan's JSON"):
#   {"tokenstorm_scan": 1, "files": N, "errors": [...], "nodes": [...],
#    "edges": [...]}
# Only the standard library is used; Python 3.8 or later.
import ast
import json
import os
import sys

SKIP_DIRS = {'.git', '.hg', '.svn', '__pycache__', 'node_modules', '.venv', 'venv', 'env',
             'site-packages', '.tox', '.mypy_cache', 'build', 'dist'}

CHAT = {'ChatOpenAI', 'AzureChatOpenAI', 'ChatAnthropic', 'ChatOllama', 'ChatVertexAI',
        'ChatMistralAI', 'ChatGroq', 'ChatBedrock', 'ChatBedrockConverse', 'ChatCohere',
        'ChatGoogleGenerativeAI', 'ChatLiteLLM', 'ChatHuggingFace', 'ChatDeepSeek', 'ChatTogether',
        'ChatFireworks', 'ChatNVIDIA', 'VLLMOpenAI', 'Ollama', 'LlamaCpp', 'HuggingFaceEndpoint'}
CLIENTS = {'OpenAI', 'AsyncOpenAI', 'AzureOpenAI', 'AsyncAzureOpenAI', 'Anthropic',
           'AsyncAnthropic'}
VSTORES = {'FAISS', 'Chroma', 'Milvus', 'Qdrant', 'QdrantVectorStore', 'PGVector', 'PGEmbedding',
           'ElasticsearchStore', 'ElasticVectorSearch', 'ElasticKnnSearch', 'Pinecone',
           'PineconeVectorStore', 'Weaviate', 'WeaviateVectorStore', 'LanceDB', 'Redis',
           'OpenSearchVectorSearch', 'MongoDBAtlasVectorSearch', 'InMemoryVectorStore',
           'VectorStoreIndex', 'QdrantClient', 'MilvusClient', 'Elasticsearch',
           'AsyncElasticsearch', 'HttpClient', 'PersistentClient', 'IndexFlatL2', 'IndexFlatIP',
           'IndexIVFFlat', 'IndexHNSWFlat', 'IndexIVFPQ'}
VS_SYSTEM = {'FAISS': 'faiss', 'Chroma': 'chroma', 'HttpClient': 'chroma',
             'PersistentClient': 'chroma', 'Milvus': 'milvus', 'MilvusClient': 'milvus',
             'Qdrant': 'qdrant', 'QdrantVectorStore': 'qdrant', 'QdrantClient': 'qdrant',
             'PGVector': 'pgvector', 'PGEmbedding': 'pgvector',
             'ElasticsearchStore': 'elasticsearch', 'ElasticVectorSearch': 'elasticsearch',
             'ElasticKnnSearch': 'elasticsearch', 'Elasticsearch': 'elasticsearch',
             'AsyncElasticsearch': 'elasticsearch', 'Pinecone': 'pinecone',
             'PineconeVectorStore': 'pinecone', 'Weaviate': 'weaviate',
             'WeaviateVectorStore': 'weaviate', 'LanceDB': 'lancedb', 'Redis': 'redis',
             'OpenSearchVectorSearch': 'opensearch', 'MongoDBAtlasVectorSearch': 'mongodb'}
AGENTS = {'create_react_agent', 'create_openai_tools_agent', 'create_tool_calling_agent',
          'create_openai_functions_agent', 'create_structured_chat_agent', 'AgentExecutor',
          'initialize_agent', 'ReActAgent', 'FunctionCallingAgent', 'OpenAIAgent'}
CHAINS = {'RetrievalQA', 'LLMChain', 'ConversationalRetrievalChain', 'create_retrieval_chain',
          'create_stuff_documents_chain', 'RunnableSequence', 'RunnableParallel',
          'RetrievalQAWithSourcesChain', 'as_query_engine', 'as_chat_engine'}
INVOKE = {'invoke', 'ainvoke', 'stream', 'astream', 'batch', 'abatch', 'astream_events',
          'run', 'arun', 'query', 'aquery', 'chat', 'achat', 'get_relevant_documents',
          'aget_relevant_documents', 'similarity_search', 'asimilarity_search',
          'similarity_search_with_score', 'embed_query', 'embed_documents', 'aembed_query',
          'aembed_documents', 'search', 'retrieve'}
STREAMING = {'stream', 'astream', 'astream_events'}
HTTP_METHODS = {'get', 'post', 'put', 'patch', 'delete', 'head', 'request', 'options'}
HTTP_MODULES = {'requests', 'httpx', 'aiohttp', 'urllib.request', 'urllib3'}
HTTP_CLIENTS = {'Client', 'AsyncClient', 'Session', 'ClientSession', 'PoolManager'}
ROUTE_DECOS = {'get', 'post', 'put', 'patch', 'delete', 'route', 'websocket', 'api_route'}
RETRY_KW = ('max_retries', 'retries', 'max_retry', 'num_retries')
TIMEOUT_KW = ('timeout', 'request_timeout', 'read_timeout', 'timeout_s')


ANALYZER = []


def last_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return '.'.join(reversed(parts))
    if isinstance(node, ast.Call):
        inner = dotted(node.func)
        if inner:
            parts.append(inner + '()')
            return '.'.join(reversed(parts))
    return None


class Scan:
    def __init__(self, root):
        self.root = root
        self.nodes = {}
        self.edges = {}
        self.errors = []
        self.modules = {}  # module name -> Module
        self.files = 0

    def node(self, nid, **kw):
        n = self.nodes.get(nid)
        if n is None:
            n = {'id': nid}
            self.nodes[nid] = n
        for k, v in kw.items():
            if v is None:
                continue
            if k == 'models':
                n.setdefault('models', [])
                for m in v:
                    if m not in n['models']:
                        n['models'].append(m)
            elif k not in n:
                n[k] = v
        return n

    def edge(self, src, dst, kind, file, line, **kw):
        if src == dst or src is None or dst is None:
            return
        key = (src, dst, kind)
        e = self.edges.get(key)
        if e is None:
            e = {'from': src, 'to': dst, 'kind': kind, 'file': file, 'line': line}
            self.edges[key] = e
        for k, v in kw.items():
            if v is not None and v is not False and k not in e:
                e[k] = v


class Module:
    def __init__(self, scan, name, rel, tree):
        self.scan = scan
        self.name = name
        self.rel = rel
        self.tree = tree
        self.imports = {}  # local name -> dotted source ("pkg.mod.attr" or "pkg.mod")
        self.bindings = {}  # top-level name -> node id
        self.consts = {}  # top-level name -> literal string or number
        self.functions = {}  # name -> FunctionDef
        self.lists = {}  # name -> node ids of a list of components (tools)
        self.state = 0  # 0 new, 1 analysing, 2 done


def literal(mod, node, env=None):
    """A constant's value: a literal, a known constant name, os.environ/getenv
    with a default ("${VAR:-default}"), or an f-string's constant parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if env is not None and node.id in env.get('consts', {}):
            return env['consts'][node.id]
        if node.id in mod.consts:
            return mod.consts[node.id]
        r = ANALYZER[0].resolve_import(mod, node.id) if ANALYZER else None
        return r[1] if r and r[0] == 'const' else None
    if isinstance(node, ast.JoinedStr):
        out = ''
        for v in node.values:
            if isinstance(v, ast.Constant):
                out += str(v.value)
            else:
                inner = literal(mod, v.value, env) if isinstance(v, ast.FormattedValue) else None
                out += str(inner) if inner is not None else '{}'
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = literal(mod, node.left, env), literal(mod, node.right, env)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
    if isinstance(node, ast.Call):
        d = dotted(node.func) or ''
        if d in ('os.getenv', 'os.environ.get', 'getenv', 'environ.get') and node.args:
            var = literal(mod, node.args[0], env)
            dflt = literal(mod, node.args[1], env) if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == 'default':
                    dflt = literal(mod, kw.value, env)
            if isinstance(var, str):
                return '${%s:-%s}' % (var, '' if dflt is None else dflt) if dflt is not None \
                    else '${%s}' % var
        if d in ('float', 'int') and node.args:
            v = literal(mod, node.args[0], env)
            if isinstance(v, str) and v.startswith('${') and ':-' in v:
                try:
                    return float(v[v.index(':-') + 2:-1])
                except ValueError:
                    return None
            return v
    if isinstance(node, ast.Subscript) and (dotted(node.value) or '') in ('os.environ', 'environ'):
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if isinstance(key, str):
            return '${%s}' % key
    return None


def seconds(mod, node, env):
    """A timeout in seconds: a number, httpx.Timeout(N, ...) or aiohttp's
    ClientTimeout(total=N); the largest of the numbers given."""
    v = literal(mod, node, env)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(node, ast.Call) and last_name(node.func) in ('Timeout', 'ClientTimeout'):
        vals = [literal(mod, a, env) for a in node.args]
        vals += [literal(mod, k.value, env) for k in node.keywords if k.arg in
                 ('total', 'timeout', 'read', 'connect', 'sock_read')]
        vals = [float(x) for x in vals if isinstance(x, (int, float))]
        if vals:
            return max(vals)
    if isinstance(node, ast.Tuple):
        vals = [literal(mod, a, env) for a in node.elts]
        vals = [float(x) for x in vals if isinstance(x, (int, float))]
        if vals:
            return sum(vals)
    return None


def kwarg(call, names):
    for kw in call.keywords:
        if kw.arg in names:
            return kw.value
    return None


class Analyzer:
    def __init__(self, scan):
        self.scan = scan

    # -- modules and names ------------------------------------------------
    def resolve_import(self, mod, name):
        src = mod.imports.get(name)
        if src is None:
            return None
        if src in self.scan.modules:
            return ('module', self.scan.modules[src])
        head, _, attr = src.rpartition('.')
        other = self.scan.modules.get(head)
        if other is not None:
            self.analyse(other)
            if attr in other.bindings:
                return ('node', other.bindings[attr])
            if attr in other.functions:
                return ('func', other, attr)
            if attr in other.consts:
                return ('const', other.consts[attr])
            if attr in other.lists:
                return ('list', other.lists[attr])
        return None

    def origin(self, mod, node):
        """The dotted import path a call's callee comes from, if imported."""
        d = dotted(node) or ''
        head = d.split('.')[0]
        src = mod.imports.get(head)
        if src is None:
            return d
        return src + d[len(head):]

    def lookup(self, mod, env, node):
        """The graph node id an expression refers to, if any."""
        if isinstance(node, ast.Name):
            if env is not None and node.id in env['vars']:
                return env['vars'][node.id]
            if node.id in mod.bindings:
                return mod.bindings[node.id]
            r = self.resolve_import(mod, node.id)
            if r and r[0] == 'node':
                return r[1]
            return None
        if isinstance(node, ast.Attribute):
            d = dotted(node)
            if d and d.startswith('self.') and env is not None and d in env.get('self', {}):
                return env['self'][d]
            if isinstance(node.value, ast.Name):
                r = self.resolve_import(mod, node.value.id)
                if r and r[0] == 'module':
                    self.analyse(r[1])
                    return r[1].bindings.get(node.attr)
            return None
        if isinstance(node, ast.Call):
            return self.lookup(mod, env, node.func.value) \
                if isinstance(node.func, ast.Attribute) else None
        return None

    def analyse(self, mod):
        if mod.state:
            return
        mod.state = 1
        for st in mod.tree.body:
            self.statement(mod, None, st, None)
        mod.state = 2

    # -- components -------------------------------------------------------
    def settings(self, mod, env, call):
        out = {}
        t = kwarg(call, TIMEOUT_KW)
        if t is not None:
            out['timeout_s'] = seconds(mod, t, env)
        r = kwarg(call, RETRY_KW)
        if r is not None:
            v = literal(mod, r, env)
            if isinstance(v, (int, float)):
                out['max_retries'] = int(v)
        return out

    def component(self, mod, env, call, target):
        """A node for a constructor call of a known kind, or None."""
        name = last_name(call.func)
        if name is None:
            return None
        line = call.lineno
        src = self.origin(mod, call.func)
        kind = None
        fields = {'class': name, 'file': mod.rel, 'line': line}
        if name in CLIENTS and (src.startswith('openai') or src.startswith('anthropic')):
            kind = 'llm_client'
        elif name in CHAT or name in CLIENTS or (name.startswith('Chat') and len(name) > 4):
            kind = 'chat_model'
        elif name.endswith('Embeddings') or name.endswith('Embedding'):
            kind = 'embeddings'
        elif name in VSTORES or (isinstance(call.func, ast.Attribute) and
                                 last_name(call.func.value) in VSTORES and
                                 name.startswith(('from_', 'load_local', 'afrom_'))):
            cls = name if name in VSTORES else last_name(call.func.value)
            kind = 'vector_store'
            fields['class'] = cls
            fields['system'] = VS_SYSTEM.get(cls)
        elif name == 'as_retriever' or name.endswith('Retriever'):
            kind = 'retriever'
            if name == 'as_retriever':
                fields['class'] = 'VectorStoreRetriever'
        elif name in AGENTS:
            kind = 'agent'
        elif name in CHAINS or (isinstance(call.func, ast.Attribute) and
                                last_name(call.func.value) in CHAINS):
            kind = 'chain'
            if name not in CHAINS:
                fields['class'] = last_name(call.func.value)
        elif name in HTTP_CLIENTS and src.split('.')[0] in ('requests', 'httpx', 'aiohttp',
                                                            'urllib3'):
            kind = 'http_client'
        if kind is None:
            return None
        m = kwarg(call, ('model', 'model_name', 'deployment_name', 'azure_deployment'))
        model = literal(mod, m, env) if m is not None else None
        base = kwarg(call, ('base_url', 'openai_api_base', 'api_base', 'azure_endpoint',
                            'endpoint', 'url', 'host', 'hosts', 'connection'))
        base_url = literal(mod, base, env) if base is not None else None
        fields.update(self.settings(mod, env, call))
        nid = '%s:%s:%d' % (kind, mod.rel, line) if not target else '%s:%s.%s' % (
            kind, mod.name, target)
        n = self.scan.node(nid, kind=kind, label=target or fields['class'],
                           models=[str(model)] if model is not None else None,
                           base_url=str(base_url) if base_url is not None else None, **fields)
        # what the component is built from: models, retrievers, stores, tools
        parts = list(call.args) + [k.value for k in call.keywords]
        if isinstance(call.func, ast.Attribute):
            parts.append(call.func.value)
        for p in parts:
            for sub in self.refs(mod, env, p):
                self.scan.edge(n['id'], sub, 'uses', mod.rel, line)
        return n['id']

    def refs(self, mod, env, node):
        """Node ids named in an expression (lists, dicts, calls, `|` pipes)."""
        out = []
        nid = self.lookup(mod, env, node)
        if nid is not None:
            return [nid]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for e in node.elts:
                out += self.refs(mod, env, e)
        elif isinstance(node, ast.Dict):
            for v in node.values:
                out += self.refs(mod, env, v)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            out += self.refs(mod, env, node.left) + self.refs(mod, env, node.right)
        elif isinstance(node, ast.Call):
            for a in list(node.args) + [k.value for k in node.keywords]:
                out += self.refs(mod, env, a)
            if isinstance(node.func, ast.Attribute):
                out += self.refs(mod, env, node.func.value)
        elif isinstance(node, ast.Name):
            group = (env or {}).get('lists', {}).get(node.id, mod.lists.get(node.id))
            if group is None:
                r = self.resolve_import(mod, node.id)
                if r and r[0] == 'list':
                    group = r[1]
            if group is not None:
                return list(group)
            r = self.resolve_import(mod, node.id)
            fn = None
            if r and r[0] == 'func':
                fn = self.function_node(r[1], r[2])
            elif node.id in mod.functions:
                fn = self.function_node(mod, node.id)
            if fn:
                out.append(fn)
        return out

    def pipe(self, mod, env, node, target):
        """`a | b | c`: a chain node that uses every component in it."""
        parts = self.refs(mod, env, node)
        if not parts:
            return None
        nid = 'chain:%s.%s' % (mod.name, target) if target else 'chain:%s:%d' % (mod.rel,
                                                                                 node.lineno)
        self.scan.node(nid, kind='chain', label=target or 'chain', **{'class': 'RunnableSequence'},
                       file=mod.rel, line=node.lineno)
        for p in parts:
            self.scan.edge(nid, p, 'uses', mod.rel, node.lineno)
        return nid

    def value(self, mod, env, node, target):
        """The node an assigned value makes or names, if any."""
        if isinstance(node, ast.Call):
            nid = self.component(mod, env, node, target)
            if nid:
                return nid
            nid = self.call(mod, env, node)
            if nid:
                return nid
            fn = last_name(node.func)
            if fn in ('with_retry', 'with_fallbacks', 'bind', 'bind_tools', 'with_config',
                      'with_structured_output') and isinstance(node.func, ast.Attribute):
                base = self.lookup(mod, env, node.func.value)
                if base:
                    self.runnable_setting(mod, env, node, base)
                    return base
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.pipe(mod, env, node, target)
        if isinstance(node, (ast.Await,)):
            return self.value(mod, env, node.value, target)
        return self.lookup(mod, env, node)

    def runnable_setting(self, mod, env, call, base):
        n = self.scan.nodes[base]
        fn = last_name(call.func)
        if fn == 'with_retry':
            a = kwarg(call, ('stop_after_attempt',))
            v = literal(mod, a, env) if a is not None else 3
            if isinstance(v, (int, float)):
                n.setdefault('retry_attempts', int(v))
                n.setdefault('retry_lib', 'langchain')
        elif fn == 'with_fallbacks':
            n['fallbacks'] = True
            for sub in self.refs(mod, env, call.args[0] if call.args else call):
                self.scan.edge(base, sub, 'fallback', mod.rel, call.lineno)

    # -- functions ----------------------------------------------------------
    def function_node(self, mod, name):
        fnode = mod.functions.get(name)
        if fnode is None:
            return None
        return 'function:%s.%s' % (mod.name, name)

    def decorators(self, mod, fn):
        """Route, tool, retry and breaker decorators of a function."""
        info = {}
        for d in fn.decorator_list:
            call = d if isinstance(d, ast.Call) else None
            head = call.func if call else d
            name = last_name(head)
            src = self.origin(mod, head)
            if name == 'tool' or src.endswith('.tool'):
                info['tool'] = True
                if call and call.args:
                    v = literal(mod, call.args[0])
                    if isinstance(v, str):
                        info['tool_name'] = v
            elif name in ROUTE_DECOS and isinstance(head, ast.Attribute) and call:
                path = literal(mod, call.args[0]) if call.args else None
                meth = 'GET' if name == 'route' else name.upper()
                info['route'] = '%s %s' % (meth, path if isinstance(path, str) else '?')
            elif name in ('retry', 'on_exception', 'on_predicate') or src.startswith(
                    ('tenacity', 'backoff', 'stamina', 'retrying')):
                info['retry_lib'] = src.split('.')[0] or name
                att = None
                if call:
                    for k in call.keywords:
                        if k.arg in ('stop',) and isinstance(k.value, ast.Call) and \
                                last_name(k.value.func) == 'stop_after_attempt' and k.value.args:
                            att = literal(mod, k.value.args[0])
                        elif k.arg in ('max_tries', 'attempts', 'stop_max_attempt_number',
                                       'tries'):
                            att = literal(mod, k.value)
                info['retry_attempts'] = int(att) if isinstance(att, (int, float)) else 0
            elif name == 'circuit' or src.startswith(('circuitbreaker', 'pybreaker',
                                                       'aiobreaker', 'purgatory')) or \
                    (isinstance(head, ast.Name) and mod.consts.get('__breaker__' + head.id)):
                info['breaker'] = True
        return info

    def function(self, mod, cls, fn):
        qual = fn.name if cls is None else '%s.%s' % (cls, fn.name)
        nid = 'function:%s.%s' % (mod.name, qual)
        info = self.decorators(mod, fn)
        kind = 'tool' if info.get('tool') else 'entry'
        label = info.get('tool_name') or qual
        self.scan.node(nid, kind=kind, label=label, file=mod.rel, line=fn.lineno,
                       route=info.get('route'), retry_attempts=info.get('retry_attempts'),
                       retry_lib=info.get('retry_lib'), breaker=info.get('breaker'),
                       is_async=isinstance(fn, ast.AsyncFunctionDef) or None)
        env = {'vars': {}, 'consts': {}, 'self': mod.self_attrs.get(cls, {}) if cls else {},
               'fn': nid, 'info': info}
        for st in fn.body:
            self.statement(mod, env, st, cls)
        return nid

    def statement(self, mod, env, st, cls):
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if env is None:
                self.function(mod, cls, st)
            return
        if isinstance(st, ast.ClassDef):
            if env is None:
                mod.self_attrs.setdefault(st.name, {})
                for sub in st.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                            sub.name == '__init__':
                        self.function(mod, st.name, sub)
                for sub in st.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                            sub.name != '__init__':
                        self.function(mod, st.name, sub)
            return
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if st.value is None:
                return
            for t in targets:
                self.assign(mod, env, t, st.value, cls)
            return
        for child in ast.iter_child_nodes(st):
            if isinstance(child, ast.stmt):
                self.statement(mod, env, child, cls)
            elif isinstance(child, ast.withitem):
                if child.optional_vars is not None:
                    self.assign(mod, env, child.optional_vars, child.context_expr, cls)
                else:
                    self.expr(mod, env, child.context_expr)
            elif isinstance(child, ast.expr):
                self.expr(mod, env, child)

    def assign(self, mod, env, target, val, cls):
        name = None
        if isinstance(target, ast.Name):
            name = target.id
        elif isinstance(target, ast.Attribute) and dotted(target) and \
                dotted(target).startswith('self.'):
            name = dotted(target)
        lit = literal(mod, val, env)
        if name and lit is not None:
            (env['consts'] if env is not None else mod.consts)[name] = lit
            return
        if isinstance(val, ast.Call) and last_name(val.func) in ('CircuitBreaker',) and name:
            mod.consts['__breaker__' + name] = True
            return
        if name and isinstance(val, (ast.List, ast.Tuple)):
            group = self.refs(mod, env, val)
            if group:
                if env is None:
                    mod.lists[name] = group
                else:
                    env.setdefault('lists', {})[name] = group
                return
        label = name.split('.')[-1] if name else None
        nid = self.value(mod, env, val, label if env is None or name.startswith('self.')
                         else None) if name else None
        if nid is None:
            self.expr(mod, env, val)
            return
        if env is None:
            mod.bindings[name] = nid
        elif name.startswith('self.'):
            env['self'][name] = nid
        else:
            env['vars'][name] = nid

    def expr(self, mod, env, node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                self.call(mod, env, sub)

    def call(self, mod, env, call):
        """A call inside a function: an invocation of a component, an OpenAI
        client request, an HTTP request or a call of another function here."""
        if getattr(call, '_ts_seen', False):
            return None
        call._ts_seen = True
        if env is None:
            return None
        src = env['fn']
        func = call.func
        name = last_name(func)
        line = call.lineno
        extra = self.settings(mod, env, call)
        stream_kw = kwarg(call, ('stream',))
        streaming = name in STREAMING or (isinstance(stream_kw, ast.Constant) and
                                          stream_kw.value is True)
        if streaming:
            self.scan.nodes[src]['streaming'] = True
        d = dotted(func) or ''
        if isinstance(func, ast.Attribute) and name in ('create', 'acreate', 'stream', 'parse') \
                and any(p in d for p in ('chat.completions', 'embeddings', 'responses',
                                         'completions', 'messages')):
            base = func.value
            while isinstance(base, ast.Attribute):
                base = base.value
            client = self.lookup(mod, env, base) or self.lookup(mod, env, func.value.value)
            if client is None:
                client = self.scan.node('llm_client:%s:%d' % (mod.rel, line), kind='llm_client',
                                        label=dotted(base) or 'client', file=mod.rel,
                                        line=line)['id']
            m = kwarg(call, ('model',))
            model = literal(mod, m, env) if m is not None else None
            if model is not None:
                self.scan.node(client, models=[str(model)])
            op = 'embeddings' if 'embeddings' in d else 'chat'
            self.scan.edge(src, client, 'invokes', mod.rel, line, method=op,
                           streaming=streaming, **extra)
            return client
        if isinstance(func, ast.Attribute) and name in INVOKE:
            target = self.lookup(mod, env, func.value)
            if target is not None:
                self.scan.edge(src, target, 'invokes', mod.rel, line, method=name,
                               streaming=streaming, sync=not name.startswith('a') or None,
                               **extra)
                return None
        http = self.http_call(mod, env, call, d, name)
        if http:
            return http
        for fid in self.refs(mod, env, func) if isinstance(func, ast.Name) else []:
            if fid.startswith('function:'):
                self.scan.edge(src, fid, 'calls', mod.rel, line)
        return None

    def http_call(self, mod, env, call, d, name):
        src = env['fn']
        if name not in HTTP_METHODS and name != 'urlopen':
            return None
        origin = self.origin(mod, call.func)
        client = self.lookup(mod, env, call.func.value) if isinstance(call.func,
                                                                      ast.Attribute) else None
        is_mod = origin.split('.')[0] in ('requests', 'httpx', 'urllib', 'urllib3')
        if client is not None and self.scan.nodes[client].get('kind') != 'http_client':
            return None
        if client is None and not is_mod:
            return None
        args = list(call.args)
        if name == 'request' and args:
            args = args[1:]
        u = kwarg(call, ('url',)) or (args[0] if args else None)
        url = literal(mod, u, env) if u is not None else None
        cnode = self.scan.nodes.get(client) if client else None
        if cnode and cnode.get('base_url') and isinstance(url, str) and '://' not in url:
            url = cnode['base_url'].rstrip('/') + '/' + url.lstrip('/')
        url = str(url) if url is not None else '?'
        key = url.split('?')[0] or url
        nid = 'http:' + key
        self.scan.node(nid, kind='http', label=key, url=key, file=mod.rel, line=call.lineno)
        extra = self.settings(mod, env, call)
        if 'timeout_s' not in extra and cnode and 'timeout_s' in cnode:
            extra['timeout_s'] = cnode['timeout_s']
        lib = origin.split('.')[0] if is_mod else cnode.get('class', '')
        sync = lib in ('requests', 'urllib', 'urllib3', 'Session', 'Client', 'PoolManager') \
            or (lib == 'httpx' and not d.startswith('await'))
        if lib == 'httpx' and is_mod:
            sync = True
        self.scan.edge(src, nid, 'http', mod.rel, call.lineno, method=name.upper(),
                       sync=sync or None, timeout_missing=('timeout_s' not in extra) or None,
                       **extra)
        return nid


def module_name(rel):
    name = rel[:-3].replace(os.sep, '.')
    if name.endswith('.__init__'):
        name = name[:-9]
    return name


def collect(mod):
    for st in mod.tree.body:
        if isinstance(st, ast.Import):
            for a in st.names:
                mod.imports[a.asname or a.name.split('.')[0]] = a.name if a.asname else \
                    a.name.split('.')[0]
        elif isinstance(st, ast.ImportFrom):
            base = st.module or ''
            if st.level:
                parts = mod.name.split('.')
                pkg = parts[:len(parts) - st.level] if not mod.rel.endswith('__init__.py') \
                    else parts[:len(parts) - st.level + 1]
                base = '.'.join(pkg + ([st.module] if st.module else []))
            for a in st.names:
                mod.imports[a.asname or a.name] = (base + '.' + a.name) if base else a.name
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.functions[st.name] = st
        elif isinstance(st, ast.Try):
            for sub in st.body:
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    fake = ast.Module(body=[sub], type_ignores=[])
                    old = mod.tree
                    mod.tree = fake
                    collect(mod)
                    mod.tree = old


def walk(root, max_files):
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith('.'))
        for f in sorted(filenames):
            if f.endswith('.py'):
                out.append(os.path.join(dirpath, f))
                if len(out) > max_files:
                    return out, True
    return out, False


def prune(scan):
    """Drops functions that reach no component (helpers, tests)."""
    changed = True
    while changed:
        changed = False
        has_out = {e['from'] for e in scan.edges.values()}
        for nid, n in list(scan.nodes.items()):
            if n['kind'] in ('entry',) and nid not in has_out and not n.get('route'):
                del scan.nodes[nid]
                changed = True
        for k, e in list(scan.edges.items()):
            if e['from'] not in scan.nodes or e['to'] not in scan.nodes:
                del scan.edges[k]


def main():
    root = sys.argv[1]
    max_files = int(sys.argv[2])
    max_bytes = int(sys.argv[3])
    sys.setrecursionlimit(10000)
    scan = Scan(root)
    paths, truncated = walk(root, max_files)
    if truncated:
        scan.errors.append({'file': '.', 'line': 0, 'message':
                            'more than %d Python files: the rest were not read' % max_files})
        paths = paths[:max_files]
    for p in paths:
        rel = os.path.relpath(p, root)
        try:
            if os.path.getsize(p) > max_bytes:
                scan.errors.append({'file': rel, 'line': 0, 'message':
                                    'larger than %d bytes: skipped' % max_bytes})
                continue
            with open(p, 'rb') as fh:
                src = fh.read()
            tree = ast.parse(src, filename=rel)
        except SyntaxError as e:
            scan.errors.append({'file': rel, 'line': e.lineno or 0,
                                'message': '%s: skipped' % (e.msg or 'invalid syntax')})
            continue
        except (ValueError, RecursionError, MemoryError, OSError) as e:
            scan.errors.append({'file': rel, 'line': 0, 'message': '%s: skipped' %
                                (type(e).__name__ + ': ' + str(e))[:200]})
            continue
        scan.files += 1
        m = Module(scan, module_name(rel), rel, tree)
        m.self_attrs = {}
        scan.modules[m.name] = m
    for m in scan.modules.values():
        collect(m)
    an = Analyzer(scan)
    ANALYZER.append(an)
    for m in list(scan.modules.values()):
        try:
            an.analyse(m)
        except RecursionError:
            scan.errors.append({'file': m.rel, 'line': 0,
                                'message': 'nested too deeply to analyse: skipped'})
    prune(scan)
    for n in scan.nodes.values():
        for k in [k for k, v in n.items() if v is None]:
            del n[k]
    doc = {'tokenstorm_scan': 1, 'files': scan.files, 'errors': scan.errors,
           'nodes': list(scan.nodes.values()), 'edges': list(scan.edges.values())}
    json.dump(doc, sys.stdout, separators=(',', ':'), allow_nan=False, default=str)
    sys.stdout.write('\n')


main()
