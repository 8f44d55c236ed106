/*
 * corpus.h - the built-in English text synthetic prompts are cut from.
 *
 * About 8 KB of original prose (written for tokenstorm, no third-party text)
 * on LLM serving, software, science and everyday topics, so prompts read like
 * language and tokenize like it. The text is printable ASCII plus '\n':
 * paragraphs are separated by a blank line and the text ends with one '\n',
 * so it can be read in a circle (end followed by start) without gluing two
 * words together.
 */
#ifndef TS_WORKLOAD_CORPUS_H
#define TS_WORKLOAD_CORPUS_H

#include <stddef.h>

/* Returns the corpus (static, NUL-terminated) and stores its length in *len
 * when len is not NULL. */
const char *corpus_text(size_t *len);

#endif
