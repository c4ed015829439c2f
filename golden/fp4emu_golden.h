/* fp4emu_golden.h - check a quantization kernel against an fp4emu golden suite.
 *
 * C99, libc only, one header. In exactly one translation unit:
 *     #define FP4EMU_GOLDEN_IMPLEMENTATION
 *     #include "fp4emu_golden.h"
 * Elsewhere include it without the define for the declarations.
 *
 * What it does (the suite layout is golden/README.md):
 *   fp4g_suite_open    reads manifest.json (bounded JSON reader: the manifest
 *                      is untrusted input, every field is checked) into cases;
 *   fp4g_case_load     loads one file of a case (.npy: f32, bf16 '<V2', f16
 *                      widened to float; u8; u32), its shape checked against
 *                      the manifest;
 *   fp4g_case_row      gathers row r of a quantize case (the elements along the
 *                      block axis, zero-padded to padded_len);
 *   fp4g_case_rbits_row the same for a stochastic case's random bytes;
 *   fp4g_swizzle_128x4 puts linear [rows, blocks] scales in the swizzled 128x4
 *                      layout a Blackwell block-scaled GEMM reads;
 *   fp4g_hif4_cube     HiF4 scale words in the Ascend Cube layout;
 *   fp4g_compare_*     counts mismatches and prints the first ones, by row,
 *                      element or block.
 * Every function returning int returns 0 on success and -1 on error, with a
 * message naming the file and field in err. */
#ifndef FP4EMU_GOLDEN_H
#define FP4EMU_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4G_MAX_DIMS 8
#define FP4G_ERR_LEN 512

typedef enum { FP4G_F32, FP4G_BF16, FP4G_F16, FP4G_U8, FP4G_U32 } fp4g_dtype;

/* Where two codes share a byte (golden/README.md, "Codes"): element 2i in the
 * low nibble (low_first) or the high one (high_first); split_half: byte j of a
 * block holds elements j (low) and j + block/2 (high). */
enum { FP4G_LOW_FIRST, FP4G_HIGH_FIRST, FP4G_SPLIT_HALF };

/* A loaded array: f32/bf16/f16 files are widened to float (f32 data), u8 to
 * uint8_t (u8), u32 to uint32_t (u32). stored_dtype is what the file held. */
typedef struct {
  fp4g_dtype stored_dtype;
  int ndim;
  size_t shape[FP4G_MAX_DIMS];
  size_t count;
  float *f32;
  uint8_t *u8;
  uint32_t *u32;
} fp4g_array;

typedef struct {
  char id[256];          /* "<recipe>/<case>", also its directory */
  char family[32];
  char format[16];       /* hif4, mxfp4, nvfp4 */
  char recipe[64];
  char input_dtype[8];   /* f32, bf16, f16 */
  int expect_error;      /* 1: the kernel must refuse the input (tail policy error) */
  int is_gemm;           /* GEMM case: the fields below are not set */
  int axis;              /* the block axis of the input */
  int nibble_order;      /* FP4G_LOW_FIRST, FP4G_HIGH_FIRST, FP4G_SPLIT_HALF (options.nibble_order) */
  int ndim;
  size_t shape[FP4G_MAX_DIMS];
  size_t block_size;
  size_t rows;           /* input positions along all axes but the block axis */
  size_t padded_len;     /* the block axis rounded up to the block size */
  size_t blocks_per_row;
  size_t scale_rows;     /* rows of one scale matrix (swizzle's R) */
  size_t scale_batch;    /* how many scale matrices follow each other */
  int has_swizzled_128x4;
  int has_hif4_cube;
  int has_global_scale;
  int has_dequant;
  /* Stochastic rounding (options.rounding "stochastic"; golden/README.md,
   * "Stochastic rounding cases"): each element is rounded with one random
   * byte, stored in rbits_file (u8, the input's shape; load it with
   * fp4g_case_load, gather a row with fp4g_case_rbits_row). has_philox_key:
   * the bytes came from Philox4x32-10, and rng ("philox-te" or
   * "philox-index"), seed, offset and rbits_map ("te" or "ptx" for
   * philox-te, else empty) regenerate them. */
  int stochastic;
  char rbits_file[64];
  int has_philox_key;
  char rng[16];
  uint64_t seed, offset;
  char rbits_map[8];
} fp4g_case;

typedef struct {
  char dir[1024];
  fp4g_case *cases;
  size_t count;
} fp4g_suite;

int fp4g_suite_open(const char *dir, fp4g_suite *s, char *err, size_t errlen);
void fp4g_suite_close(fp4g_suite *s);
/* Loads <dir>/<case id>/<name>; name is a plain file name ("codes.npy"). */
int fp4g_case_load(const fp4g_suite *s, const fp4g_case *c, const char *name, fp4g_array *a,
                   char *err, size_t errlen);
int fp4g_npy_load(const char *path, fp4g_array *a, char *err, size_t errlen);
void fp4g_array_free(fp4g_array *a);
/* Row r (0 <= r < rows) of a quantize case's input into dst[padded_len]. */
int fp4g_case_row(const fp4g_case *c, const fp4g_array *input, size_t r, float *dst);
/* The random bytes of row r of a stochastic case (rbits: its rbits_file) into
 * dst[padded_len], the padding lanes 0 (zero rounds to zero whatever its byte). */
int fp4g_case_rbits_row(const fp4g_case *c, const fp4g_array *rbits, size_t r, uint8_t *dst);
size_t fp4g_swizzle_128x4_size(const fp4g_case *c);
size_t fp4g_swizzle_128x4_offset(size_t r, size_t col, size_t padded_cols);
/* linear: [scale_batch * scale_rows, blocks_per_row]; out: fp4g_swizzle_128x4_size bytes. */
void fp4g_swizzle_128x4(const fp4g_case *c, const uint8_t *linear, uint8_t *out);
size_t fp4g_hif4_cube_size(const fp4g_case *c);
/* linear: [scale_batch * scale_rows, blocks_per_row] HiF4 words; out: fp4g_hif4_cube_size bytes. */
void fp4g_hif4_cube(const fp4g_case *c, const uint32_t *linear, uint8_t *out);
/* Byte and bit shift of element e of the row-major [rows, padded_len] codes. */
void fp4g_code_position(const fp4g_case *c, size_t e, size_t *byte, unsigned *shift);
/* Returns the number of mismatches; prints up to max_report of them to report
 * (NULL: none) as "<case> <what>: row R element E ...". */
size_t fp4g_compare_codes(const fp4g_case *c, const uint8_t *expected, const uint8_t *got,
                          FILE *report, size_t max_report);
size_t fp4g_compare_u8(const char *case_id, const char *what, const uint8_t *expected,
                       const uint8_t *got, size_t n, size_t row_len, FILE *report, size_t max_report);
size_t fp4g_compare_u32(const char *case_id, const char *what, const uint32_t *expected,
                        const uint32_t *got, size_t n, size_t row_len, FILE *report, size_t max_report);
/* Bit-exact: every NaN equals every NaN, +0 differs from -0. */
size_t fp4g_compare_f32(const char *case_id, const char *what, const float *expected,
                        const float *got, size_t n, size_t row_len, FILE *report, size_t max_report);

#ifdef __cplusplus
}
#endif

#ifdef FP4EMU_GOLDEN_IMPLEMENTATION

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#endif

/* Caps on hostile input: far above what any level of suite holds. */
#define FP4G_MAX_MANIFEST ((long)1 << 30)
#define FP4G_MAX_JSON_DEPTH 32
#define FP4G_MAX_ELEMENTS ((size_t)1 << 34)

static int fp4g__fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err && errlen) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- a bounded JSON reader: parses into a node array ---------------------- */

enum { FP4G_J_NULL, FP4G_J_BOOL, FP4G_J_NUM, FP4G_J_STR, FP4G_J_ARR, FP4G_J_OBJ };

typedef struct {
  int type;
  size_t start, len;   /* the raw text (strings: without the quotes) */
  long key;            /* object member: node index of its key string, else -1 */
  long first, next;    /* first child, next sibling, -1 when none */
} fp4g__jnode;

typedef struct {
  const char *text;
  size_t len, pos;
  fp4g__jnode *nodes;
  size_t count, cap;
  const char *err;
} fp4g__json;

static long fp4g__jnew(fp4g__json *j, int type) {
  if (j->count == j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 1024;
    fp4g__jnode *n = (fp4g__jnode *)realloc(j->nodes, cap * sizeof *n);
    if (!n) { j->err = "out of memory"; return -1; }
    j->nodes = n;
    j->cap = cap;
  }
  j->nodes[j->count].type = type;
  j->nodes[j->count].start = j->pos;
  j->nodes[j->count].len = 0;
  j->nodes[j->count].key = -1;
  j->nodes[j->count].first = -1;
  j->nodes[j->count].next = -1;
  return (long)j->count++;
}

static void fp4g__jws(fp4g__json *j) {
  while (j->pos < j->len && (j->text[j->pos] == ' ' || j->text[j->pos] == '\t' ||
                             j->text[j->pos] == '\n' || j->text[j->pos] == '\r'))
    ++j->pos;
}

static long fp4g__jvalue(fp4g__json *j, int depth);

static long fp4g__jstring(fp4g__json *j) {
  long n;
  ++j->pos; /* the opening quote */
  n = fp4g__jnew(j, FP4G_J_STR);
  if (n < 0) return -1;
  j->nodes[n].start = j->pos;
  while (j->pos < j->len && j->text[j->pos] != '"') {
    unsigned char ch = (unsigned char)j->text[j->pos];
    if (ch < 0x20) { j->err = "control character in a string"; return -1; }
    if (ch == '\\') {
      if (j->pos + 1 >= j->len) break;
      if (j->text[j->pos + 1] == 'u') {
        size_t k;
        for (k = 2; k < 6; ++k)
          if (j->pos + k >= j->len || !strchr("0123456789abcdefABCDEF", j->text[j->pos + k]) ||
              j->text[j->pos + k] == 0) {
            j->err = "bad \\u escape";
            return -1;
          }
        j->pos += 6;
        continue;
      }
      if (!strchr("\"\\/bfnrt", j->text[j->pos + 1]) || j->text[j->pos + 1] == 0) {
        j->err = "bad escape in a string";
        return -1;
      }
      j->pos += 2;
      continue;
    }
    ++j->pos;
  }
  if (j->pos >= j->len) { j->err = "unterminated string"; return -1; }
  j->nodes[n].len = j->pos - j->nodes[n].start;
  ++j->pos;
  return n;
}

static long fp4g__jcontainer(fp4g__json *j, int depth, int is_obj) {
  long n = fp4g__jnew(j, is_obj ? FP4G_J_OBJ : FP4G_J_ARR), last = -1;
  const char close = is_obj ? '}' : ']';
  if (n < 0) return -1;
  ++j->pos;
  fp4g__jws(j);
  if (j->pos < j->len && j->text[j->pos] == close) { ++j->pos; return n; }
  for (;;) {
    long key = -1, v;
    fp4g__jws(j);
    if (is_obj) {
      if (j->pos >= j->len || j->text[j->pos] != '"') { j->err = "expected a member name"; return -1; }
      key = fp4g__jstring(j);
      if (key < 0) return -1;
      fp4g__jws(j);
      if (j->pos >= j->len || j->text[j->pos] != ':') { j->err = "expected ':'"; return -1; }
      ++j->pos;
    }
    v = fp4g__jvalue(j, depth + 1);
    if (v < 0) return -1;
    j->nodes[v].key = key;
    if (last < 0) j->nodes[n].first = v; else j->nodes[last].next = v;
    last = v;
    fp4g__jws(j);
    if (j->pos < j->len && j->text[j->pos] == ',') { ++j->pos; continue; }
    if (j->pos < j->len && j->text[j->pos] == close) { ++j->pos; return n; }
    j->err = is_obj ? "expected ',' or '}'" : "expected ',' or ']'";
    return -1;
  }
}

static long fp4g__jvalue(fp4g__json *j, int depth) {
  char ch;
  if (depth > FP4G_MAX_JSON_DEPTH) { j->err = "nested too deeply"; return -1; }
  fp4g__jws(j);
  if (j->pos >= j->len) { j->err = "unexpected end"; return -1; }
  ch = j->text[j->pos];
  if (ch == '{') return fp4g__jcontainer(j, depth, 1);
  if (ch == '[') return fp4g__jcontainer(j, depth, 0);
  if (ch == '"') return fp4g__jstring(j);
  if (ch == 't' || ch == 'f' || ch == 'n') {
    const char *word = ch == 't' ? "true" : ch == 'f' ? "false" : "null";
    size_t wl = strlen(word);
    long n;
    if (j->len - j->pos < wl || memcmp(j->text + j->pos, word, wl) != 0) { j->err = "bad literal"; return -1; }
    n = fp4g__jnew(j, ch == 'n' ? FP4G_J_NULL : FP4G_J_BOOL);
    if (n < 0) return -1;
    j->nodes[n].len = wl;
    j->pos += wl;
    return n;
  }
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    long n = fp4g__jnew(j, FP4G_J_NUM);
    if (n < 0) return -1;
    if (j->text[j->pos] == '-') ++j->pos;
    while (j->pos < j->len && strchr("0123456789.eE+-", j->text[j->pos]) && j->text[j->pos] != 0) ++j->pos;
    j->nodes[n].len = j->pos - j->nodes[n].start;
    return n;
  }
  j->err = "unexpected character";
  return -1;
}

static int fp4g__jkey_is(const fp4g__json *j, long node, const char *name) {
  const fp4g__jnode *k;
  if (node < 0 || j->nodes[node].key < 0) return 0;
  k = &j->nodes[j->nodes[node].key];
  return k->len == strlen(name) && memcmp(j->text + k->start, name, k->len) == 0;
}

static long fp4g__jget(const fp4g__json *j, long obj, const char *name) {
  long c;
  if (obj < 0 || j->nodes[obj].type != FP4G_J_OBJ) return -1;
  for (c = j->nodes[obj].first; c >= 0; c = j->nodes[c].next)
    if (fp4g__jkey_is(j, c, name)) return c;
  return -1;
}

/* A string member copied out; escapes other than \" and \\ are refused (the
 * fields read here are identifiers). */
static int fp4g__jstr(const fp4g__json *j, long obj, const char *name, char *dst, size_t cap) {
  long n = fp4g__jget(j, obj, name);
  size_t i, o = 0;
  if (n < 0 || j->nodes[n].type != FP4G_J_STR) return -1;
  for (i = 0; i < j->nodes[n].len; ++i) {
    char ch = j->text[j->nodes[n].start + i];
    if (ch == '\\') {
      ++i;
      ch = j->text[j->nodes[n].start + i];
      if (ch != '"' && ch != '\\' && ch != '/') return -1;
    }
    if (o + 1 >= cap) return -1;
    dst[o++] = ch;
  }
  dst[o] = 0;
  return 0;
}

/* A non-negative integer below 2^53 from a number node. */
static int fp4g__jsize_node(const fp4g__json *j, long n, size_t *out) {
  size_t i, v = 0;
  if (n < 0 || j->nodes[n].type != FP4G_J_NUM || j->nodes[n].len == 0 || j->nodes[n].len > 15) return -1;
  for (i = 0; i < j->nodes[n].len; ++i) {
    char ch = j->text[j->nodes[n].start + i];
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (size_t)(ch - '0');
  }
  *out = v;
  return 0;
}

static int fp4g__jsize(const fp4g__json *j, long obj, const char *name, size_t *out) {
  return fp4g__jsize_node(j, fp4g__jget(j, obj, name), out);
}

/* An unsigned 64-bit integer member (a Philox seed or offset). */
static int fp4g__ju64(const fp4g__json *j, long obj, const char *name, uint64_t *out) {
  long n = fp4g__jget(j, obj, name);
  size_t i;
  uint64_t v = 0;
  if (n < 0 || j->nodes[n].type != FP4G_J_NUM || j->nodes[n].len == 0 || j->nodes[n].len > 20) return -1;
  for (i = 0; i < j->nodes[n].len; ++i) {
    char ch = j->text[j->nodes[n].start + i];
    if (ch < '0' || ch > '9' || v > (UINT64_MAX - (uint64_t)(ch - '0')) / 10) return -1;
    v = v * 10 + (uint64_t)(ch - '0');
  }
  *out = v;
  return 0;
}

static int fp4g__jshape(const fp4g__json *j, long arr, int *ndim, size_t *shape) {
  long c;
  int d = 0;
  if (arr < 0 || j->nodes[arr].type != FP4G_J_ARR) return -1;
  for (c = j->nodes[arr].first; c >= 0; c = j->nodes[c].next) {
    if (d == FP4G_MAX_DIMS || fp4g__jsize_node(j, c, &shape[d]) != 0) return -1;
    ++d;
  }
  *ndim = d;
  return 0;
}

static int fp4g__safe_name(const char *s, int allow_slash) {
  size_t i;
  if (!s[0] || s[0] == '/' || s[0] == '.') return 0;
  for (i = 0; s[i]; ++i) {
    char ch = s[i];
    if (ch == '/' && allow_slash) {
      if (s[i + 1] == '.' || s[i + 1] == '/' || s[i + 1] == 0) return 0;
      continue;
    }
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '_' || ch == '-' || ch == '.'))
      return 0;
  }
  return 1;
}

/* One quantize case: fields read, then checked against each other. */
static int fp4g__read_case(const fp4g__json *j, long obj, fp4g_case *c, size_t index, const char *path,
                           char *err, size_t errlen) {
  char expect[16];
  long opts, files, f;
  size_t i, inner = 1, outer = 1, count = 1;
  memset(c, 0, sizeof *c);
#define FP4G__BAD(field, why) \
  return fp4g__fail(err, errlen, "%s: case %lu (%s): field '%s' %s; regenerate the suite", path, \
                    (unsigned long)index, c->id[0] ? c->id : "?", field, why)
  if (j->nodes[obj].type != FP4G_J_OBJ) FP4G__BAD("cases[]", "is not an object");
  if (fp4g__jstr(j, obj, "id", c->id, sizeof c->id) != 0) FP4G__BAD("id", "is missing or not a short string");
  if (!fp4g__safe_name(c->id, 1)) FP4G__BAD("id", "is not a relative path of plain names");
  if (fp4g__jstr(j, obj, "family", c->family, sizeof c->family) != 0) FP4G__BAD("family", "is missing or not a short string");
  if (fp4g__jstr(j, obj, "format", c->format, sizeof c->format) != 0) FP4G__BAD("format", "is missing or not a short string");
  if (fp4g__jstr(j, obj, "recipe", c->recipe, sizeof c->recipe) != 0) FP4G__BAD("recipe", "is missing or not a short string");
  if (fp4g__jstr(j, obj, "expect", expect, sizeof expect) != 0) FP4G__BAD("expect", "is missing");
  if (strcmp(expect, "error") != 0 && strcmp(expect, "output") != 0) FP4G__BAD("expect", "is not 'output' or 'error'");
  c->expect_error = strcmp(expect, "error") == 0;
  if (fp4g__jsize(j, obj, "block_size", &c->block_size) != 0 || c->block_size == 0 || c->block_size > 4096)
    FP4G__BAD("block_size", "is not an integer in 1..4096");
  if (strcmp(c->family, "gemm") == 0) { c->is_gemm = 1; return 0; }
  if (fp4g__jstr(j, obj, "input_dtype", c->input_dtype, sizeof c->input_dtype) != 0) FP4G__BAD("input_dtype", "is missing");
  if (fp4g__jshape(j, fp4g__jget(j, obj, "shape"), &c->ndim, c->shape) != 0 || c->ndim < 1)
    FP4G__BAD("shape", "is not a list of 1..8 non-negative integers");
  opts = fp4g__jget(j, obj, "options");
  {
    size_t axis;
    if (fp4g__jsize(j, opts, "axis", &axis) != 0 || axis >= (size_t)c->ndim) FP4G__BAD("options.axis", "is not an axis of the shape");
    c->axis = (int)axis;
  }
  {
    char order[16];
    if (fp4g__jstr(j, opts, "nibble_order", order, sizeof order) != 0) FP4G__BAD("options.nibble_order", "is missing");
    if (strcmp(order, "low_first") == 0) c->nibble_order = FP4G_LOW_FIRST;
    else if (strcmp(order, "high_first") == 0) c->nibble_order = FP4G_HIGH_FIRST;
    else if (strcmp(order, "split_half") == 0) c->nibble_order = FP4G_SPLIT_HALF;
    else FP4G__BAD("options.nibble_order", "is not low_first, high_first or split_half");
  }
  {
    char rounding[16] = "";
    long sr = fp4g__jget(j, obj, "stochastic");
    if (fp4g__jget(j, opts, "rounding") >= 0 && fp4g__jstr(j, opts, "rounding", rounding, sizeof rounding) != 0)
      FP4G__BAD("options.rounding", "is not a short string");
    c->stochastic = strcmp(rounding, "stochastic") == 0;
    if (sr >= 0 && j->nodes[sr].type == FP4G_J_NULL) sr = -1;
    if (!c->stochastic && sr >= 0) FP4G__BAD("stochastic", "is given, but options.rounding is not stochastic");
    if (c->stochastic) {
      size_t len;
      if (sr < 0 || j->nodes[sr].type != FP4G_J_OBJ) FP4G__BAD("stochastic", "is missing or not an object");
      if (fp4g__jstr(j, sr, "rbits", c->rbits_file, sizeof c->rbits_file) != 0 || !fp4g__safe_name(c->rbits_file, 0) ||
          (len = strlen(c->rbits_file)) < 5 || strcmp(c->rbits_file + len - 4, ".npy") != 0 ||
          strcmp(c->rbits_file, "input.npy") == 0)
        FP4G__BAD("stochastic.rbits", "is not the plain .npy name of the case's random bytes");
      c->has_philox_key = fp4g__jget(j, sr, "rng") >= 0;
      if (c->has_philox_key) {
        if (fp4g__jstr(j, sr, "rng", c->rng, sizeof c->rng) != 0 ||
            (strcmp(c->rng, "philox-te") != 0 && strcmp(c->rng, "philox-index") != 0))
          FP4G__BAD("stochastic.rng", "is not philox-te or philox-index");
        if (fp4g__ju64(j, sr, "seed", &c->seed) != 0) FP4G__BAD("stochastic.seed", "is not an integer in 0..2^64-1");
        if (fp4g__ju64(j, sr, "offset", &c->offset) != 0) FP4G__BAD("stochastic.offset", "is not an integer in 0..2^64-1");
        if (strcmp(c->rng, "philox-te") == 0 &&
            (fp4g__jstr(j, sr, "rbits_map", c->rbits_map, sizeof c->rbits_map) != 0 ||
             (strcmp(c->rbits_map, "te") != 0 && strcmp(c->rbits_map, "ptx") != 0)))
          FP4G__BAD("stochastic.rbits_map", "is not te or ptx");
      }
    }
  }
  if (fp4g__jsize(j, obj, "rows", &c->rows) != 0) FP4G__BAD("rows", "is missing");
  if (fp4g__jsize(j, obj, "padded_len", &c->padded_len) != 0) FP4G__BAD("padded_len", "is missing");
  if (fp4g__jsize(j, obj, "blocks_per_row", &c->blocks_per_row) != 0) FP4G__BAD("blocks_per_row", "is missing");
  for (i = 0; i < (size_t)c->ndim; ++i) {
    if (c->shape[i] != 0 && count > FP4G_MAX_ELEMENTS / c->shape[i]) FP4G__BAD("shape", "has too many elements");
    count *= c->shape[i];
    if ((int)i < c->axis) outer *= c->shape[i];
    if ((int)i > c->axis) inner *= c->shape[i];
  }
  if (c->rows != outer * inner) FP4G__BAD("rows", "is not the product of the shape without the block axis");
  if (c->padded_len != (c->shape[c->axis] + c->block_size - 1) / c->block_size * c->block_size)
    FP4G__BAD("padded_len", "is not the block axis rounded up to the block size");
  if (c->blocks_per_row * c->block_size != c->padded_len) FP4G__BAD("blocks_per_row", "is not padded_len / block_size");
  if (c->rows != 0 && c->padded_len > FP4G_MAX_ELEMENTS / c->rows) FP4G__BAD("padded_len", "is too large");
  /* The scale matrix of the swizzled layout (golden/README.md, "Kernel-ready scale layouts"). */
  if (c->axis == c->ndim - 1) {
    c->scale_rows = c->ndim >= 2 ? c->shape[c->ndim - 2] : 1;
    c->scale_batch = c->scale_rows ? c->rows / c->scale_rows : 0;
  } else {
    c->scale_rows = inner;
    c->scale_batch = outer;
  }
  files = fp4g__jget(j, obj, "files");
  if (files < 0 || j->nodes[files].type != FP4G_J_ARR) FP4G__BAD("files", "is not a list");
  for (f = j->nodes[files].first; f >= 0; f = j->nodes[f].next) {
    char path[512];
    const char *base;
    if (fp4g__jstr(j, f, "path", path, sizeof path) != 0) FP4G__BAD("files[].path", "is missing");
    base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "scales_swizzled_128x4.npy") == 0) c->has_swizzled_128x4 = 1;
    if (strcmp(base, "scales_hif4_cube.npy") == 0) c->has_hif4_cube = 1;
    if (strcmp(base, "global_scale.npy") == 0) c->has_global_scale = 1;
    if (strcmp(base, "dequant.npy") == 0) c->has_dequant = 1;
    if (c->stochastic && strcmp(base, c->rbits_file) == 0) c->stochastic = 2;  /* listed */
  }
  if (c->stochastic == 1) FP4G__BAD("stochastic.rbits", "names a file that 'files' does not list");
  c->stochastic = c->stochastic != 0;
#undef FP4G__BAD
  return 0;
}

static char *fp4g__read_file(const char *path, long max, size_t *len, char *err, size_t errlen) {
  FILE *fp;
  char *buf;
  long size;
#if defined(__unix__) || defined(__APPLE__)
  /* fopen would block on a FIFO and read a device without end: regular files only. */
  struct stat st;
  if (stat(path, &st) != 0) { fp4g__fail(err, errlen, "%s: cannot open (missing?)", path); return NULL; }
  if (!S_ISREG(st.st_mode)) { fp4g__fail(err, errlen, "%s: not a regular file", path); return NULL; }
#endif
  fp = fopen(path, "rb");
  if (!fp) { fp4g__fail(err, errlen, "%s: cannot open", path); return NULL; }
  if (fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
    fclose(fp);
    fp4g__fail(err, errlen, "%s: not a regular file", path);
    return NULL;
  }
  if (size > max) {
    fclose(fp);
    fp4g__fail(err, errlen, "%s: %ld bytes, more than the %ld this reader accepts", path, size, max);
    return NULL;
  }
  buf = (char *)malloc((size_t)size + 1);
  if (!buf || fread(buf, 1, (size_t)size, fp) != (size_t)size) {
    free(buf);
    fclose(fp);
    fp4g__fail(err, errlen, "%s: read failed", path);
    return NULL;
  }
  fclose(fp);
  buf[size] = 0;
  *len = (size_t)size;
  return buf;
}

int fp4g_suite_open(const char *dir, fp4g_suite *s, char *err, size_t errlen) {
  char path[1100];
  fp4g__json j;
  long root, cases, c;
  char schema[32];
  size_t n = 0, version;
  memset(s, 0, sizeof *s);
  memset(&j, 0, sizeof j);
  if (strlen(dir) >= sizeof s->dir) return fp4g__fail(err, errlen, "%s: suite path too long", dir);
  strcpy(s->dir, dir);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  j.text = fp4g__read_file(path, FP4G_MAX_MANIFEST, &j.len, err, errlen);
  if (!j.text) return -1;
  root = fp4g__jvalue(&j, 0);
  if (root >= 0) {
    fp4g__jws(&j);
    if (j.pos != j.len) { j.err = "trailing characters after the top-level value"; root = -1; }
  }
  if (root < 0) {
    fp4g__fail(err, errlen, "%s: not valid JSON at byte %lu: %s; regenerate the suite", path,
               (unsigned long)j.pos, j.err ? j.err : "?");
    goto fail;
  }
  if (fp4g__jstr(&j, root, "schema", schema, sizeof schema) != 0 || strcmp(schema, "fp4emu-golden") != 0) {
    fp4g__fail(err, errlen, "%s: field 'schema' is not \"fp4emu-golden\": not a golden suite manifest", path);
    goto fail;
  }
  if (fp4g__jsize(&j, root, "schema_version", &version) != 0 || version != 1) {
    fp4g__fail(err, errlen, "%s: field 'schema_version' is not 1, the version this header reads; use the header of the fp4emu that wrote the suite", path);
    goto fail;
  }
  cases = fp4g__jget(&j, root, "cases");
  if (cases < 0 || j.nodes[cases].type != FP4G_J_ARR) {
    fp4g__fail(err, errlen, "%s: field 'cases' is not a list", path);
    goto fail;
  }
  for (c = j.nodes[cases].first; c >= 0; c = j.nodes[c].next) ++n;
  s->cases = (fp4g_case *)calloc(n ? n : 1, sizeof *s->cases);
  if (!s->cases) { fp4g__fail(err, errlen, "%s: out of memory", path); goto fail; }
  for (c = j.nodes[cases].first; c >= 0; c = j.nodes[c].next) {
    if (fp4g__read_case(&j, c, &s->cases[s->count], s->count, path, err, errlen) != 0) goto fail;
    ++s->count;
  }
  free((void *)j.text);
  free(j.nodes);
  return 0;
fail:
  free((void *)j.text);
  free(j.nodes);
  fp4g_suite_close(s);
  return -1;
}

void fp4g_suite_close(fp4g_suite *s) {
  free(s->cases);
  s->cases = NULL;
  s->count = 0;
}

void fp4g_array_free(fp4g_array *a) {
  free(a->f32);
  free(a->u8);
  free(a->u32);
  a->f32 = NULL;
  a->u8 = NULL;
  a->u32 = NULL;
}

static float fp4g__bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE binary16 to binary32, exact. */
static float fp4g__half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return fp4g__bits_to_float(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return fp4g__bits_to_float(sign);
    exp = 113; /* 127 - 15 + 1, shifted down below */
    while (!(man & 0x400u)) { man <<= 1; --exp; }
    return fp4g__bits_to_float(sign | (exp << 23) | ((man & 0x3FFu) << 13));
  }
  return fp4g__bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

/* Parses the .npy header dict: 'descr', 'fortran_order', 'shape'. */
int fp4g_npy_load(const char *path, fp4g_array *a, char *err, size_t errlen) {
  size_t len, hlen, hstart, item = 0, i;
  char *buf, *h, *p;
  const char *d;
  memset(a, 0, sizeof *a);
  buf = fp4g__read_file(path, (long)0x7FFFFFFF, &len, err, errlen);
  if (!buf) return -1;
#define FP4G__NPY_BAD(why) do { fp4g__fail(err, errlen, "%s: %s", path, why); free(buf); return -1; } while (0)
  if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) FP4G__NPY_BAD("not a .npy file (magic)");
  if (buf[6] == 1) { hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8; hstart = 10; }
  else if (buf[6] == 2 || buf[6] == 3) {
    if (len < 12) FP4G__NPY_BAD("truncated header");
    hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 | (size_t)(unsigned char)buf[10] << 16 |
           (size_t)(unsigned char)buf[11] << 24;
    hstart = 12;
  } else FP4G__NPY_BAD("unknown .npy version");
  if (hlen > len - hstart) FP4G__NPY_BAD("header longer than the file");
  h = (char *)malloc(hlen + 1);
  if (!h) FP4G__NPY_BAD("out of memory");
  memcpy(h, buf + hstart, hlen);
  h[hlen] = 0;
  for (i = 0; i < hlen; ++i) if (h[i] == 0) h[i] = ' ';
#undef FP4G__NPY_BAD
#define FP4G__NPY_BAD(why) do { fp4g__fail(err, errlen, "%s: %s", path, why); free(h); free(buf); return -1; } while (0)
  d = strstr(h, "'descr':");
  if (!d) FP4G__NPY_BAD("header has no 'descr'");
  d += 8;
  while (*d == ' ') ++d;
  if (!strncmp(d, "'<f4'", 5)) { a->stored_dtype = FP4G_F32; item = 4; }
  else if (!strncmp(d, "'<V2'", 5)) { a->stored_dtype = FP4G_BF16; item = 2; }
  else if (!strncmp(d, "'<f2'", 5)) { a->stored_dtype = FP4G_F16; item = 2; }
  else if (!strncmp(d, "'|u1'", 5) || !strncmp(d, "'<u1'", 5)) { a->stored_dtype = FP4G_U8; item = 1; }
  else if (!strncmp(d, "'<u4'", 5)) { a->stored_dtype = FP4G_U32; item = 4; }
  else FP4G__NPY_BAD("'descr' is not one of '<f4', '<V2' (bf16), '<f2', '|u1', '<u4'");
  if (!strstr(h, "'fortran_order': False")) FP4G__NPY_BAD("'fortran_order' is not False (write C order)");
  p = strstr(h, "'shape':");
  if (!p) FP4G__NPY_BAD("header has no 'shape'");
  p += 8;
  while (*p == ' ') ++p;
  if (*p != '(') FP4G__NPY_BAD("'shape' is not a tuple");
  ++p;
  a->count = 1;
  for (;;) {
    size_t v = 0;
    int digits = 0;
    while (*p == ' ') ++p;
    if (*p == ')') break;
    while (*p >= '0' && *p <= '9') {
      if (++digits > 15) FP4G__NPY_BAD("'shape' dimension too large");
      v = v * 10 + (size_t)(*p++ - '0');
    }
    if (!digits || a->ndim == FP4G_MAX_DIMS) FP4G__NPY_BAD("'shape' is not a tuple of at most 8 integers");
    if (v != 0 && a->count > FP4G_MAX_ELEMENTS / v) FP4G__NPY_BAD("'shape' has too many elements");
    a->shape[a->ndim++] = v;
    a->count *= v;
    while (*p == ' ') ++p;
    if (*p == ',') ++p;
    else if (*p != ')') FP4G__NPY_BAD("'shape' is malformed");
  }
  if (len - hstart - hlen != a->count * item) FP4G__NPY_BAD("data size does not match 'shape' and 'descr'");
  {
    const unsigned char *src = (const unsigned char *)buf + hstart + hlen;
    size_t n = a->count ? a->count : 1;
    if (a->stored_dtype == FP4G_U8) {
      a->u8 = (uint8_t *)malloc(n);
      if (!a->u8) FP4G__NPY_BAD("out of memory");
      memcpy(a->u8, src, a->count);
    } else if (a->stored_dtype == FP4G_U32) {
      a->u32 = (uint32_t *)malloc(n * 4);
      if (!a->u32) FP4G__NPY_BAD("out of memory");
      for (i = 0; i < a->count; ++i)
        a->u32[i] = src[4 * i] | (uint32_t)src[4 * i + 1] << 8 | (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
    } else {
      a->f32 = (float *)malloc(n * 4);
      if (!a->f32) FP4G__NPY_BAD("out of memory");
      for (i = 0; i < a->count; ++i) {
        if (a->stored_dtype == FP4G_F32)
          a->f32[i] = fp4g__bits_to_float(src[4 * i] | (uint32_t)src[4 * i + 1] << 8 | (uint32_t)src[4 * i + 2] << 16 |
                                          (uint32_t)src[4 * i + 3] << 24);
        else if (a->stored_dtype == FP4G_BF16)
          a->f32[i] = fp4g__bits_to_float((uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16);
        else
          a->f32[i] = fp4g__half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
      }
    }
  }
#undef FP4G__NPY_BAD
  free(h);
  free(buf);
  return 0;
}

int fp4g_case_load(const fp4g_suite *s, const fp4g_case *c, const char *name, fp4g_array *a, char *err,
                   size_t errlen) {
  char path[1600];
  if (!fp4g__safe_name(name, 0)) return fp4g__fail(err, errlen, "file name '%s' is not a plain name", name);
  snprintf(path, sizeof path, "%s/%s/%s", s->dir, c->id, name);
  if (fp4g_npy_load(path, a, err, errlen) != 0) return -1;
  /* The arrays a kernel's result is compared with must have the manifest's
   * size and type, so that a caller may index them by its fields. */
  if (!c->is_gemm && (strcmp(name, "input.npy") == 0 || strcmp(name, "dequant.npy") == 0)) {
    int d, ok = a->ndim == c->ndim && a->f32 != NULL;
    for (d = 0; ok && d < c->ndim; ++d) ok = a->shape[d] == c->shape[d];
    if (!ok) {
      fp4g_array_free(a);
      return fp4g__fail(err, errlen, "%s: not a float array of the manifest's 'shape'; regenerate the suite", path);
    }
  }
  if (!c->is_gemm && c->stochastic && strcmp(name, c->rbits_file) == 0) {
    int d, ok = a->ndim == c->ndim && a->u8 != NULL;
    for (d = 0; ok && d < c->ndim; ++d) ok = a->shape[d] == c->shape[d];
    if (!ok) {
      fp4g_array_free(a);
      return fp4g__fail(err, errlen, "%s: not a u8 array of the manifest's 'shape' (one random byte per element); "
                        "regenerate the suite", path);
    }
  }
  if (!c->is_gemm && (strcmp(name, "codes.npy") == 0 || strcmp(name, "scales.npy") == 0)) {
    size_t want = strcmp(name, "codes.npy") == 0 ? c->rows * (c->padded_len / 2) : c->rows * c->blocks_per_row;
    int hif4_scales = strcmp(name, "scales.npy") == 0 && strcmp(c->format, "hif4") == 0;
    if (a->count != want || (hif4_scales ? a->u32 == NULL : a->u8 == NULL)) {
      fp4g_array_free(a);
      return fp4g__fail(err, errlen, "%s: %lu elements, the manifest implies %lu of %s; regenerate the suite", path,
                        (unsigned long)a->count, (unsigned long)want, hif4_scales ? "u32" : "u8");
    }
  }
  if (!c->is_gemm && strcmp(name, "scales_swizzled_128x4.npy") == 0 &&
      (a->u8 == NULL || a->count != fp4g_swizzle_128x4_size(c))) {
    fp4g_array_free(a);
    return fp4g__fail(err, errlen, "%s: not %lu bytes of u8, the swizzled size of the manifest's shape", path,
                      (unsigned long)fp4g_swizzle_128x4_size(c));
  }
  if (!c->is_gemm && strcmp(name, "scales_hif4_cube.npy") == 0 &&
      (a->u8 == NULL || a->count != fp4g_hif4_cube_size(c))) {
    fp4g_array_free(a);
    return fp4g__fail(err, errlen, "%s: not %lu bytes of u8, the Cube layout size of the manifest's shape", path,
                      (unsigned long)fp4g_hif4_cube_size(c));
  }
  return 0;
}

int fp4g_case_row(const fp4g_case *c, const fp4g_array *input, size_t r, float *dst) {
  size_t inner = 1, i, n = c->shape[c->axis], outer_i, inner_i;
  int d;
  if (c->is_gemm || r >= c->rows || !input->f32 || input->count != c->rows * n) return -1;
  for (d = c->axis + 1; d < c->ndim; ++d) inner *= c->shape[d];
  outer_i = r / inner;
  inner_i = r % inner;
  for (i = 0; i < c->padded_len; ++i)
    dst[i] = i < n ? input->f32[(outer_i * n + i) * inner + inner_i] : 0.0f;
  return 0;
}

int fp4g_case_rbits_row(const fp4g_case *c, const fp4g_array *rbits, size_t r, uint8_t *dst) {
  size_t inner = 1, i, n = c->shape[c->axis], outer_i, inner_i;
  int d;
  if (!c->stochastic || r >= c->rows || !rbits->u8 || rbits->count != c->rows * n) return -1;
  for (d = c->axis + 1; d < c->ndim; ++d) inner *= c->shape[d];
  outer_i = r / inner;
  inner_i = r % inner;
  for (i = 0; i < c->padded_len; ++i) dst[i] = i < n ? rbits->u8[(outer_i * n + i) * inner + inner_i] : 0;
  return 0;
}

size_t fp4g_swizzle_128x4_size(const fp4g_case *c) {
  return c->scale_batch * ((c->scale_rows + 127) / 128 * 128) * ((c->blocks_per_row + 3) / 4 * 4);
}

/* golden/README.md, "Kernel-ready scale layouts": a 512-byte tile per 128 rows x 4 blocks,
 * bytes ordered [r mod 32][(r mod 128) div 32][c mod 4]. */
size_t fp4g_swizzle_128x4_offset(size_t r, size_t col, size_t padded_cols) {
  return ((r / 128) * (padded_cols / 4) + col / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + col % 4;
}

void fp4g_swizzle_128x4(const fp4g_case *c, const uint8_t *linear, uint8_t *out) {
  size_t rp = (c->scale_rows + 127) / 128 * 128, cp = (c->blocks_per_row + 3) / 4 * 4, l, r, k;
  memset(out, 0, fp4g_swizzle_128x4_size(c));
  for (l = 0; l < c->scale_batch; ++l)
    for (r = 0; r < c->scale_rows; ++r)
      for (k = 0; k < c->blocks_per_row; ++k)
        out[l * rp * cp + fp4g_swizzle_128x4_offset(r, k, cp)] =
            linear[(l * c->scale_rows + r) * c->blocks_per_row + k];
}

size_t fp4g_hif4_cube_size(const fp4g_case *c) {
  return c->scale_batch * ((c->scale_rows + 15) / 16 * 16) * c->blocks_per_row * 4;
}

/* golden/README.md, "Kernel-ready scale layouts": [R'/16][C][64-byte cell]; in a cell,
 * bytes 0..31 hold (E6M2, L2) of each of 16 rows, bytes 32..63 (L3 low, L3 high). */
void fp4g_hif4_cube(const fp4g_case *c, const uint32_t *linear, uint8_t *out) {
  size_t rp = (c->scale_rows + 15) / 16 * 16, cols = c->blocks_per_row, l, r, k;
  unsigned b;
  memset(out, 0, fp4g_hif4_cube_size(c));
  for (l = 0; l < c->scale_batch; ++l)
    for (r = 0; r < c->scale_rows; ++r)
      for (k = 0; k < cols; ++k) {
        uint32_t word = linear[(l * c->scale_rows + r) * cols + k];
        uint8_t *cell = out + l * rp * cols * 4 + ((r / 16) * cols + k) * 64;
        for (b = 0; b < 4; ++b) cell[(b < 2 ? 0 : 32) + (r % 16) * 2 + b % 2] = (uint8_t)(word >> (8 * b));
      }
}

void fp4g_code_position(const fp4g_case *c, size_t e, size_t *byte, unsigned *shift) {
  if (c->nibble_order == FP4G_SPLIT_HALF) {
    size_t half = c->block_size / 2, j = e % c->block_size;
    *byte = e / c->block_size * half + j % half;
    *shift = j < half ? 0 : 4;
  } else {
    *byte = e / 2;
    *shift = ((e % 2) == (c->nibble_order == FP4G_LOW_FIRST ? 1u : 0u)) ? 4 : 0;
  }
}

size_t fp4g_compare_codes(const fp4g_case *c, const uint8_t *expected, const uint8_t *got, FILE *report,
                          size_t max_report) {
  size_t e, bad = 0, n = c->rows * c->padded_len;
  for (e = 0; e < n; ++e) {
    size_t byte;
    unsigned shift, want, have;
    fp4g_code_position(c, e, &byte, &shift);
    want = (expected[byte] >> shift) & 0xFu;
    have = (got[byte] >> shift) & 0xFu;
    if (want == have) continue;
    if (report && bad < max_report)
      fprintf(report, "%s codes: row %lu element %lu (block %lu): expected 0x%X, got 0x%X\n", c->id,
              (unsigned long)(e / c->padded_len), (unsigned long)(e % c->padded_len),
              (unsigned long)(e % c->padded_len / c->block_size), want, have);
    ++bad;
  }
  return bad;
}

/* One mismatch line; the caller counts. */
static void fp4g__report(FILE *report, const char *case_id, const char *what, size_t i, size_t row_len,
                         unsigned long want, unsigned long have, int hex_digits) {
  if (!row_len) row_len = 1;
  fprintf(report, "%s %s: row %lu index %lu: expected 0x%0*lX, got 0x%0*lX\n", case_id, what,
          (unsigned long)(i / row_len), (unsigned long)(i % row_len), hex_digits, want, hex_digits, have);
}

size_t fp4g_compare_u8(const char *case_id, const char *what, const uint8_t *expected, const uint8_t *got,
                       size_t n, size_t row_len, FILE *report, size_t max_report) {
  size_t i, bad = 0;
  for (i = 0; i < n; ++i)
    if (expected[i] != got[i] && bad++ < max_report && report)
      fp4g__report(report, case_id, what, i, row_len, expected[i], got[i], 2);
  return bad;
}

size_t fp4g_compare_u32(const char *case_id, const char *what, const uint32_t *expected, const uint32_t *got,
                        size_t n, size_t row_len, FILE *report, size_t max_report) {
  size_t i, bad = 0;
  for (i = 0; i < n; ++i)
    if (expected[i] != got[i] && bad++ < max_report && report)
      fp4g__report(report, case_id, what, i, row_len, expected[i], got[i], 8);
  return bad;
}

static uint32_t fp4g__float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

size_t fp4g_compare_f32(const char *case_id, const char *what, const float *expected, const float *got,
                        size_t n, size_t row_len, FILE *report, size_t max_report) {
  size_t i, bad = 0;
  for (i = 0; i < n; ++i) {
    uint32_t x = fp4g__float_bits(expected[i]), y = fp4g__float_bits(got[i]);
    int both_nan = (x & 0x7FFFFFFFu) > 0x7F800000u && (y & 0x7FFFFFFFu) > 0x7F800000u;
    if (x != y && !both_nan && bad++ < max_report && report)
      fp4g__report(report, case_id, what, i, row_len, x, y, 8);
  }
  return bad;
}

#endif /* FP4EMU_GOLDEN_IMPLEMENTATION */
#endif /* FP4EMU_GOLDEN_H */
