/* Runs a small, plainly written MXFP4 quantizer (recipe mxfp4.ocp, written
 * from docs/formats.md's MXFP4 table) through fp4emu_golden.h against a
 * suite: every mxfp4.ocp quantize case must match (codes, E8M0 scales, the
 * swizzled 128x4 scales of layout cases, dequantized values; stochastic cases
 * rounded with their random bytes), and the same kernel with a planted
 * rounding bug, or ignoring the random bytes, must be caught.
 *
 * usage: toy_mxfp4_test SUITE_DIR [HOSTILE_DIR]
 * HOSTILE_DIR: a directory this test may write damaged manifests into. */
#define FP4EMU_GOLDEN_IMPLEMENTATION
#include "fp4emu_golden.h"

#include <stdlib.h>
#include <string.h>

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* E2M1 magnitude code of y >= 0 with round-to-nearest-even, saturating at 6.
 * Grid 0, 0.5, 1, 1.5, 2, 3, 4, 6; a tie goes to the code with an even mantissa
 * bit. plant_bug rounds the ties 2.5 and 5 up instead. */
static unsigned e2m1_rne(float y, int plant_bug) {
  if (y <= 0.25f) return 0;
  if (y < 0.75f) return 1;
  if (y <= 1.25f) return 2;
  if (y < 1.75f) return 3;
  if (plant_bug ? y < 2.5f : y <= 2.5f) return 4;
  if (y < 3.5f) return 5;
  if (plant_bug ? y < 5.0f : y <= 5.0f) return 6;
  return 7;
}

static const float e2m1_value[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* E2M1 magnitude code of y >= 0 with stochastic rounding and random byte r
 * (docs/formats.md, "Stochastic rounding"): between grid neighbours lo < hi,
 * away from zero iff floor(256 (y - lo) / (hi - lo)) + r >= 256; 6 and
 * beyond saturate. The steps are powers of two, so the double is exact. */
static unsigned e2m1_sr(float y, unsigned r) {
  unsigned c = 0, k;
  if (y >= 6.0f) return 7;
  while (c < 7 && e2m1_value[c + 1] <= y) ++c;
  k = (unsigned)(256.0 * ((double)y - e2m1_value[c]) / (e2m1_value[c + 1] - e2m1_value[c]));
  return k + r >= 256 ? c + 1 : c;
}

/* One block of 32: scale code and codes (one per byte, unpacked); rbits: the
 * block's random bytes (stochastic rounding), NULL for round-to-nearest-even. */
static void quantize_block(const float *x, const uint8_t *rbits, uint8_t *scale, uint8_t *codes, int plant_bug) {
  int i, special = 0, e, s;
  uint32_t amax_bits = 0;
  for (i = 0; i < 32; ++i) {
    uint32_t m = bits_of(x[i]) & 0x7FFFFFFFu;
    if (m >= 0x7F800000u) special = 1;
    if (m > amax_bits) amax_bits = m;
  }
  if (special) { /* NaN or Inf amax: NaN scale, code 0x4 in every lane (the torchao CUDA bits) */
    *scale = 0xFF;
    for (i = 0; i < 32; ++i) codes[i] = 0x4;
    return;
  }
  if (amax_bits == 0) {
    s = -127;
  } else {
    e = (int)(amax_bits >> 23) - 127; /* floor(log2 amax) from the exponent bits */
    s = e - 2;                        /* the largest E2M1 value is 1.5 * 2^2 */
    if (s < -127) s = -127;
  }
  *scale = (uint8_t)(s + 127);
  for (i = 0; i < 32; ++i) {
    /* 2^-s is a normal float for s in -127..125 */
    float y = x[i] * float_of((uint32_t)(127 - s) << 23);
    unsigned sign = (bits_of(y) >> 31) << 3;
    const float mag = y < 0 ? -y : y;
    codes[i] = (uint8_t)(sign | (rbits ? e2m1_sr(mag, rbits[i]) : e2m1_rne(mag, plant_bug == 1)));
  }
}

typedef struct {
  size_t cases, stochastic, skipped_error, mismatches;
} run_result;

/* plant_bug 1: the ties 2.5 and 5 rounded up; 2: the random bytes of
 * stochastic cases ignored (round-to-nearest-even instead). */

static int run_case(const fp4g_suite *s, const fp4g_case *c, int plant_bug, size_t *mismatches, FILE *report) {
  char err[FP4G_ERR_LEN];
  fp4g_array in, want_codes, want_scales, want_swz, want_deq, rbits;
  size_t r, b, i, n = c->shape[c->axis], inner = 1;
  const int sr = c->stochastic && plant_bug != 2;
  uint8_t *row_rbits = (uint8_t *)malloc(c->padded_len + 1);
  uint8_t *codes = (uint8_t *)calloc(c->rows * c->padded_len / 2 + 1, 1);
  uint8_t *scales = (uint8_t *)calloc(c->rows * c->blocks_per_row + 1, 1);
  float *row = (float *)malloc((c->padded_len + 1) * sizeof *row);
  float *deq = (float *)malloc((c->rows * n + 1) * sizeof *deq);
  int d;
  if (!codes || !scales || !row || !deq || !row_rbits) { fprintf(stderr, "out of memory\n"); exit(1); }
  memset(&rbits, 0, sizeof rbits);
  if (sr && fp4g_case_load(s, c, c->rbits_file, &rbits, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  for (d = c->axis + 1; d < c->ndim; ++d) inner *= c->shape[d];
  if (fp4g_case_load(s, c, "input.npy", &in, err, sizeof err) != 0 ||
      fp4g_case_load(s, c, "codes.npy", &want_codes, err, sizeof err) != 0 ||
      fp4g_case_load(s, c, "scales.npy", &want_scales, err, sizeof err) != 0 ||
      fp4g_case_load(s, c, "dequant.npy", &want_deq, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  for (r = 0; r < c->rows; ++r) {
    fp4g_case_row(c, &in, r, row);
    if (sr) fp4g_case_rbits_row(c, &rbits, r, row_rbits);
    for (b = 0; b < c->blocks_per_row; ++b) {
      uint8_t block_codes[32];
      uint8_t *scale = &scales[r * c->blocks_per_row + b];
      quantize_block(row + b * 32, sr ? row_rbits + b * 32 : NULL, scale, block_codes, plant_bug);
      for (i = 0; i < 32; ++i) {
        size_t e = b * 32 + i;
        codes[(r * c->padded_len + e) / 2] |= (uint8_t)(block_codes[i] << (4 * (e % 2)));
        if (e < n) { /* dequant in the input's layout: X * e2m1, NaN for scale 0xFF */
          /* X = 2^(c-127); c = 0 is the subnormal 2^-127 */
          float x_scale = *scale ? float_of((uint32_t)*scale << 23) : float_of(0x00400000u);
          float v = *scale == 0xFF ? float_of(0x7FC00000u) : e2m1_value[block_codes[i] & 7] * x_scale;
          if (block_codes[i] & 8) v = -v;
          deq[(r / inner * n + e) * inner + r % inner] = v;
        }
      }
    }
  }
  *mismatches += fp4g_compare_codes(c, want_codes.u8, codes, report, 4);
  *mismatches += fp4g_compare_u8(c->id, "scales", want_scales.u8, scales, c->rows * c->blocks_per_row,
                                 c->blocks_per_row, report, 4);
  *mismatches += fp4g_compare_f32(c->id, "dequant", want_deq.f32, deq, want_deq.count, n, report, 4);
  if (c->has_swizzled_128x4) {
    uint8_t *swz;
    if (fp4g_case_load(s, c, "scales_swizzled_128x4.npy", &want_swz, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      return -1;
    }
    swz = (uint8_t *)malloc(fp4g_swizzle_128x4_size(c) + 1);
    if (!swz) { fprintf(stderr, "out of memory\n"); exit(1); }
    fp4g_swizzle_128x4(c, scales, swz);
    *mismatches += fp4g_compare_u8(c->id, "scales_swizzled_128x4", want_swz.u8, swz, want_swz.count,
                                   want_swz.shape[want_swz.ndim - 1], report, 4);
    free(swz);
    fp4g_array_free(&want_swz);
  }
  fp4g_array_free(&in);
  if (sr) fp4g_array_free(&rbits);
  free(row_rbits);
  fp4g_array_free(&want_codes);
  fp4g_array_free(&want_scales);
  fp4g_array_free(&want_deq);
  free(codes);
  free(scales);
  free(row);
  free(deq);
  return 0;
}

static int run_suite(const fp4g_suite *s, int plant_bug, run_result *res, FILE *report) {
  size_t k;
  memset(res, 0, sizeof *res);
  for (k = 0; k < s->count; ++k) {
    const fp4g_case *c = &s->cases[k];
    if (strcmp(c->recipe, "mxfp4.ocp") != 0 || c->is_gemm) continue;
    if (c->expect_error) { ++res->skipped_error; continue; } /* a kernel's own refusal, not checked here */
    if (c->block_size != 32) { fprintf(stderr, "%s: block size is not 32\n", c->id); return -1; }
    if (run_case(s, c, plant_bug, &res->mismatches, report) != 0) return -1;
    ++res->cases;
    res->stochastic += c->stochastic != 0;
  }
  return 0;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* A stochastic-rounding case with `rounding` in its options and `sr` as its
 * "stochastic" field; only input.npy is listed. */
#define SR_CASE(rounding, sr)                                                                              \
  "{\"schema\":\"fp4emu-golden\",\"schema_version\":1,\"cases\":[{\"id\":\"m/c\",\"family\":\"stochastic\","    \
  "\"format\":\"mxfp4\",\"recipe\":\"mxfp4.ocp\",\"expect\":\"output\",\"block_size\":32,\"input_dtype\":\"f32\"," \
  "\"shape\":[2,32],\"options\":{\"axis\":1,\"nibble_order\":\"low_first\"," rounding "},\"stochastic\":" sr ","   \
  "\"rows\":2,\"padded_len\":32,\"blocks_per_row\":1,\"files\":[{\"path\":\"m/c/input.npy\"}]}]}"

/* Damaged manifests are refused with a message, never read past their end. */
static int hostile_manifests(const char *dir) {
  static const char *bad[] = {
      "",
      "{",
      "{\"schema\":\"fp4emu-golden\",\"schema_version\":1,\"cases\":[{\"id\":\"a/b\"",
      "{\"schema\":\"fp4emu-golden\",\"schema_version\":2,\"cases\":[]}",
      "{\"schema\":\"other\",\"schema_version\":1,\"cases\":[]}",
      "{\"schema\":\"fp4emu-golden\",\"schema_version\":1,\"cases\":[{\"id\":\"../x\",\"family\":\"codes\","
      "\"format\":\"mxfp4\",\"recipe\":\"mxfp4.ocp\",\"expect\":\"output\",\"block_size\":32}]}",
      "{\"schema\":\"fp4emu-golden\",\"schema_version\":1,\"cases\":[{\"id\":\"m/c\",\"family\":\"codes\","
      "\"format\":\"mxfp4\",\"recipe\":\"mxfp4.ocp\",\"expect\":\"output\",\"block_size\":32,"
      "\"input_dtype\":\"f32\",\"shape\":[2,33],\"options\":{\"axis\":1,\"nibble_order\":\"low_first\"},\"rows\":2,\"padded_len\":32,"
      "\"blocks_per_row\":1,\"files\":[]}]}",
      "{\"schema\":\"fp4emu-golden\",\"schema_version\":1,\"cases\":[{\"id\":\"m/c\",\"family\":\"codes\","
      "\"format\":\"mxfp4\",\"recipe\":\"mxfp4.ocp\",\"expect\":\"output\",\"block_size\":32,"
      "\"input_dtype\":\"f32\",\"shape\":[99999999999999,99999999999999],\"options\":{\"axis\":1,\"nibble_order\":\"low_first\"},"
      "\"rows\":99999999999999,\"padded_len\":99999999999999,\"blocks_per_row\":1,\"files\":[]}]}",
      /* stochastic rounding: the random bits' file and Philox key are checked too */
      SR_CASE("\"rounding\":\"stochastic\"", "{\"rbits\":\"../rbits.npy\"}"),
      SR_CASE("\"rounding\":\"stochastic\"", "{\"rbits\":\"rbits.npy\"}"), /* not in files */
      SR_CASE("\"rounding\":\"stochastic\"",
              "{\"rbits\":\"rbits.npy\",\"rng\":\"philox-te\",\"seed\":-1,\"offset\":0,\"rbits_map\":\"te\"}"),
      SR_CASE("\"rounding\":\"stochastic\"",
              "{\"rbits\":\"rbits.npy\",\"rng\":\"philox-te\",\"seed\":18446744073709551616,\"offset\":0,"
              "\"rbits_map\":\"te\"}"),
      SR_CASE("\"rounding\":\"rne\"", "{\"rbits\":\"rbits.npy\"}"),
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
      "{\"schema\":\"fp4emu-golden\\",
  };
  char path[1200], err[FP4G_ERR_LEN];
  size_t i;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    fp4g_suite s;
    if (write_text(path, bad[i]) != 0) { fprintf(stderr, "cannot write %s\n", path); return -1; }
    err[0] = 0;
    if (fp4g_suite_open(dir, &s, err, sizeof err) == 0) {
      fprintf(stderr, "FAIL: damaged manifest %lu was accepted\n", (unsigned long)i);
      fp4g_suite_close(&s);
      return -1;
    }
    if (!strstr(err, "manifest.json")) {
      fprintf(stderr, "FAIL: damaged manifest %lu: message does not name the file: %s\n", (unsigned long)i, err);
      return -1;
    }
    printf("damaged manifest %lu refused: %s\n", (unsigned long)i, err);
  }
  return 0;
}

/* Damaged .npy files are refused with a message naming the file. */
#define NPY_BYTES(literal) {literal, sizeof(literal) - 1}
static int hostile_npy(const char *dir) {
  static const struct { const char *bytes; size_t len; } bad[] = {
      NPY_BYTES(""),
      NPY_BYTES("\x93NUMPY"),
      NPY_BYTES("\x93NUMPY\x01\x00\xff\x00{'descr': '<f4'"),
      NPY_BYTES("\x93NUMPY\x01\x00\x3e\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }    \n"),
      NPY_BYTES("\x93NUMPY\x01\x00\x3e\x00{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }     \n"),
      NPY_BYTES("\x93NUMPY\x01\x00\x3e\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }    \n"),
      NPY_BYTES("\x93NUMPY\x01\x00\x47\x00{'descr': '|u1', 'fortran_order': False, 'shape': (9999999999999999,)}\n"),
      NPY_BYTES("\x93NUMPY\x01\x00\x47\x00{'descr': '|u1', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9,)}"),
  };
  char path[1200], err[FP4G_ERR_LEN];
  size_t i;
  snprintf(path, sizeof path, "%s/damaged.npy", dir);
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    fp4g_array a;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bad[i].bytes, 1, bad[i].len, f) != bad[i].len || fclose(f) != 0) {
      fprintf(stderr, "cannot write %s\n", path);
      return -1;
    }
    if (fp4g_npy_load(path, &a, err, sizeof err) == 0) {
      fprintf(stderr, "FAIL: damaged .npy %lu was accepted\n", (unsigned long)i);
      fp4g_array_free(&a);
      return -1;
    }
    if (!strstr(err, "damaged.npy")) {
      fprintf(stderr, "FAIL: damaged .npy %lu: message does not name the file: %s\n", (unsigned long)i, err);
      return -1;
    }
    printf("damaged .npy %lu refused: %s\n", (unsigned long)i, err);
  }
  return 0;
}

/* The layout helpers against the generator's files: each layout case's
 * expected linear scales, laid out by the header, must equal its layout file. */
static int check_layouts(const fp4g_suite *s) {
  size_t k, checked = 0, bad = 0;
  char err[FP4G_ERR_LEN];
  for (k = 0; k < s->count; ++k) {
    const fp4g_case *c = &s->cases[k];
    fp4g_array lin, want;
    uint8_t *got;
    const int cube = c->has_hif4_cube;
    if (c->is_gemm || (!c->has_swizzled_128x4 && !cube)) continue;
    if (fp4g_case_load(s, c, "scales.npy", &lin, err, sizeof err) != 0 ||
        fp4g_case_load(s, c, cube ? "scales_hif4_cube.npy" : "scales_swizzled_128x4.npy", &want, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      return -1;
    }
    got = (uint8_t *)malloc(want.count + 1);
    if (!got) { fprintf(stderr, "out of memory\n"); exit(1); }
    if (cube) fp4g_hif4_cube(c, lin.u32, got);
    else fp4g_swizzle_128x4(c, lin.u8, got);
    bad += fp4g_compare_u8(c->id, cube ? "scales_hif4_cube" : "scales_swizzled_128x4", want.u8, got, want.count,
                           want.shape[want.ndim - 1], stderr, 4);
    ++checked;
    free(got);
    fp4g_array_free(&lin);
    fp4g_array_free(&want);
  }
  printf("scale layouts: %lu layout cases, %lu mismatches\n", (unsigned long)checked, (unsigned long)bad);
  if (checked == 0 || bad != 0) { fprintf(stderr, "FAIL: the layout helpers must reproduce the layout files\n"); return -1; }
  return 0;
}

/* fp4g_code_position against blocks.txt, which lists each edge block's codes
 * one hex digit per element: every nibble order of the suite's recipes. */
static int check_code_positions(const fp4g_suite *s) {
  size_t k, blocks = 0, bad = 0;
  char err[FP4G_ERR_LEN], path[1600];
  static char line[16384];
  for (k = 0; k < s->count; ++k) {
    const fp4g_case *c = &s->cases[k];
    fp4g_array codes;
    FILE *f;
    if (c->is_gemm || c->expect_error) continue;
    snprintf(path, sizeof path, "%s/%s/blocks.txt", s->dir, c->id);
    f = fopen(path, "r");
    if (!f) continue;
    if (fp4g_case_load(s, c, "codes.npy", &codes, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      fclose(f);
      return -1;
    }
    while (fgets(line, sizeof line, f)) {
      unsigned long block, row, in_row;
      size_t i;
      const char *digits = strrchr(line, '|');
      if (line[0] == '#') continue;
      if (sscanf(line, "%lu %lu %lu", &block, &row, &in_row) != 3 || !digits || row >= c->rows ||
          in_row >= c->blocks_per_row) {
        fprintf(stderr, "%s: unreadable line\n", path);
        fclose(f);
        return -1;
      }
      ++digits;
      while (*digits == ' ') ++digits;
      for (i = 0; i < c->block_size; ++i) {
        size_t byte, e = row * c->padded_len + in_row * c->block_size + i;
        unsigned shift, want;
        if (sscanf(digits + i, "%1x", &want) != 1) {
          fprintf(stderr, "%s: codes field too short\n", path);
          fclose(f);
          return -1;
        }
        fp4g_code_position(c, e, &byte, &shift);
        if (((codes.u8[byte] >> shift) & 0xFu) != want) ++bad;
      }
      ++blocks;
    }
    fclose(f);
    fp4g_array_free(&codes);
  }
  printf("code positions: %lu blocks.txt blocks, %lu codes differ\n", (unsigned long)blocks, (unsigned long)bad);
  if (blocks == 0 || bad != 0) { fprintf(stderr, "FAIL: fp4g_code_position must agree with blocks.txt\n"); return -1; }
  return 0;
}

/* A directory where a file belongs is refused, not read. */
static int not_a_file(const char *dir) {
  fp4g_array a;
  char err[FP4G_ERR_LEN];
  if (fp4g_npy_load(dir, &a, err, sizeof err) == 0) {
    fprintf(stderr, "FAIL: a directory was read as a .npy file\n");
    fp4g_array_free(&a);
    return -1;
  }
  printf("directory refused: %s\n", err);
  return 0;
}

int main(int argc, char **argv) {
  fp4g_suite s;
  char err[FP4G_ERR_LEN];
  run_result good, bug;
  if (argc < 2) { fprintf(stderr, "usage: toy_mxfp4_test SUITE_DIR [HOSTILE_DIR]\n"); return 2; }
  if (fp4g_suite_open(argv[1], &s, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
  if (run_suite(&s, 0, &good, stderr) != 0) return 1;
  printf("toy mxfp4.ocp kernel: %lu cases (%lu stochastic), %lu mismatches (%lu expect-error cases not run)\n",
         (unsigned long)good.cases, (unsigned long)good.stochastic, (unsigned long)good.mismatches,
         (unsigned long)good.skipped_error);
  if (good.cases == 0 || good.mismatches != 0) { fprintf(stderr, "FAIL: the correct toy kernel must match\n"); return 1; }
  if (good.stochastic == 0) { fprintf(stderr, "FAIL: the suite has no stochastic mxfp4.ocp case\n"); return 1; }
  if (check_layouts(&s) != 0 || check_code_positions(&s) != 0) return 1;
  if (run_suite(&s, 1, &bug, stdout) != 0) return 1;
  printf("toy kernel with ties 2.5 and 5 rounded up: %lu mismatches\n", (unsigned long)bug.mismatches);
  if (bug.mismatches == 0) { fprintf(stderr, "FAIL: the planted bug was not caught\n"); return 1; }
  if (run_suite(&s, 2, &bug, stdout) != 0) return 1;
  printf("toy kernel rounding stochastic cases to nearest (random bytes ignored): %lu mismatches\n",
         (unsigned long)bug.mismatches);
  if (bug.mismatches == 0) { fprintf(stderr, "FAIL: a kernel that ignores the random bytes was not caught\n"); return 1; }
  fp4g_suite_close(&s);
  if (argc > 2 && (hostile_manifests(argv[2]) != 0 || hostile_npy(argv[2]) != 0 || not_a_file(argv[2]) != 0)) return 1;
  printf("PASS\n");
  return 0;
}
