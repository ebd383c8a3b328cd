/* options_json.c - the options as JSON: the resolved configuration (options_to_json, stored in
 * the result file as config_json) and the table itself (--options-json: what a tool that builds
 * dtbench command lines needs, instead of parsing --help). Both read options.c's table through
 * its visitors. */
#include "options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
} StrBuf;

static void sb_add(StrBuf *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = 2 * (b->len + n + 1);
        b->buf = realloc(b->buf, b->cap);
        if (!b->buf) abort();
    }
    memcpy(b->buf + b->len, s, n + 1);
    b->len += n;
}

static void json_string(StrBuf *b, const char *s) {
    char esc[8];
    sb_add(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            snprintf(esc, sizeof esc, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", *s);
        else
            snprintf(esc, sizeof esc, "%c", *s);
        sb_add(b, esc);
    }
    sb_add(b, "\"");
}

static void json_member(const char *key, const char *value, void *user) {
    StrBuf *b = user;
    if (b->len > 1) sb_add(b, ", ");
    json_string(b, key);
    sb_add(b, ": ");
    json_string(b, value);
}

char *options_to_json(const Options *o) {
    StrBuf b = {0};
    sb_add(&b, "{");
    options_visit(o, json_member, &b);
    sb_add(&b, "}");
    return b.buf;
}

static void json_number(StrBuf *b, const char *key, double x) {
    char num[64];
    snprintf(num, sizeof num, isfinite(x) ? "%.17g" : "null", x);
    sb_add(b, ", ");
    json_string(b, key);
    sb_add(b, ": ");
    sb_add(b, num);
}

static void describe_one(const OptionInfo *o, void *user) {
    StrBuf *b = user;
    sb_add(b, b->len > 1 ? ",\n {" : "\n {");
    json_string(b, "name");
    sb_add(b, ": ");
    json_string(b, o->name);
    sb_add(b, ", ");
    json_string(b, "type");
    sb_add(b, ": ");
    json_string(b, o->type);
    sb_add(b, ", ");
    json_string(b, "choices");
    sb_add(b, ": [");
    const char *c = o->choices;
    for (int first = 1; *c; first = 0) { /* comma-separated */
        const size_t n = strcspn(c, ",");
        char word[256];
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), c);
        if (!first) sb_add(b, ", ");
        json_string(b, word);
        c += n + (c[n] == ',');
    }
    sb_add(b, "], ");
    json_string(b, "default");
    sb_add(b, ": ");
    json_string(b, o->default_text);
    if (!strcmp(o->type, "int") || !strcmp(o->type, "float")) {
        json_number(b, "min", o->min);
        json_number(b, "max", o->max > 0 ? o->max : NAN);
    }
    sb_add(b, ", ");
    json_string(b, "help");
    sb_add(b, ": ");
    json_string(b, o->help);
    sb_add(b, "}");
}

void options_print_json(FILE *out) {
    StrBuf b = {0};
    sb_add(&b, "[");
    options_describe(describe_one, &b);
    sb_add(&b, "\n]\n");
    fputs(b.buf, out);
    free(b.buf);
}
