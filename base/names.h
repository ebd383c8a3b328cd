/* names.h - lists of names in one string, comma-separated: the options a component reads, and a
 * choice's names written once, in the order of its enum ("fp32,tf32,bf16,fp16" for Precision:
 * value i is named by the i-th word). The option table parses and prints such choices through it
 * (src/run/options.c), and code that names a value reads the same list, so a name and its value
 * cannot drift apart. Header-only: the GPU module uses it without relying on the program to have
 * linked it. */
#ifndef DTBENCH_NAMES_H
#define DTBENCH_NAMES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The position of `word` in `list` (the value it names), -1 when it is none of them. */
static inline int names_find(const char *list, const char *word) {
    const size_t n = strlen(word);
    int i = 0;
    for (const char *p = list; p && *p; i++) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, word, n)) return i;
        p = end ? end + 1 : NULL;
    }
    return -1;
}

/* The name of value `index` in `list` into buf[len], "?" when there is none; returns buf. */
static inline const char *names_at(const char *list, int index, char *buf, size_t len) {
    const char *p = index >= 0 ? list : NULL;
    for (int i = 0; p && i < index; i++)
        if ((p = strchr(p, ','))) p++;
    if (p && *p)
        snprintf(buf, len, "%.*s", (int)strcspn(p, ","), p);
    else
        snprintf(buf, len, "?");
    return buf;
}

/* names_at into a buffer of its own that lives to the end of the enclosing block: a name for a
 * message or an attribute, e.g. NAME_OF(PRECISION_NAMES, p). */
#define NAME_OF(list, index) names_at((list), (int)(index), (char[32]){""}, 32)

#endif
