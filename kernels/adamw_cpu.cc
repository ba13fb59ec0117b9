#include "kernels/adamw_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace zeropp {
namespace kernels {
namespace {

inline float Bf16ToFloat(uint16_t x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

void ScalarRange(const AdamWArgs& a, const AdamWCoeffs& c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = (a.grad ? a.grad[i] : Bf16ToFloat(a.grad_bf16[i])) * a.grad_scale;
    // The vector paths' (and the CUDA kernel's) rounding order, element for element: std::fma
    // rounds once, as the vector FMA does, so every path gives the same bits.
    const float m = std::fma(a.exp_avg[i], c.b1, c.one_minus_b1 * g);
    const float v = std::fma(a.exp_avg_sq[i], c.b2, (c.one_minus_b2 * g) * g);
    a.exp_avg[i] = m;
    a.exp_avg_sq[i] = v;
    const float denom = std::fma(std::sqrt(v), c.inv_bc2_sqrt, c.eps);
    const float p = a.param[i] * c.decay - (c.step_size * m) / denom;
    a.param[i] = p;
    if (a.param_bf16_out) a.param_bf16_out[i] = FloatToBf16(p);
  }
}

__attribute__((target("avx2,fma"))) void Avx2Range(const AdamWArgs& a, const AdamWCoeffs& c, int64_t begin, int64_t end) {
  const __m256 b1 = _mm256_set1_ps(c.b1), b2 = _mm256_set1_ps(c.b2), omb1 = _mm256_set1_ps(c.one_minus_b1),
               omb2 = _mm256_set1_ps(c.one_minus_b2), eps = _mm256_set1_ps(c.eps), ss = _mm256_set1_ps(c.step_size),
               inv_bc2 = _mm256_set1_ps(c.inv_bc2_sqrt), decay = _mm256_set1_ps(c.decay),
               scale = _mm256_set1_ps(a.grad_scale);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 g;
    if (a.grad) {
      g = _mm256_loadu_ps(a.grad + i);
    } else {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.grad_bf16 + i));
      g = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    g = _mm256_mul_ps(g, scale);
    __m256 m = _mm256_fmadd_ps(_mm256_loadu_ps(a.exp_avg + i), b1, _mm256_mul_ps(omb1, g));
    __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(a.exp_avg_sq + i), b2, _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
    _mm256_storeu_ps(a.exp_avg + i, m);
    _mm256_storeu_ps(a.exp_avg_sq + i, v);
    __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(v), inv_bc2, eps);
    // A reciprocal estimate would be cheaper than a division but less exact; divide for parity.
    __m256 p = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(a.param + i), decay), _mm256_div_ps(_mm256_mul_ps(ss, m), denom));
    _mm256_storeu_ps(a.param + i, p);
    if (a.param_bf16_out) {
      // Round to nearest even as FloatToBf16 (u + 0x7fff + ((u >> 16) & 1), high half), packed to
      // 16 bits; NaNs take the scalar rule. (One value at a time, this copy-out cost as much as the
      // update: an offloaded bf16 unit on this project's AVX2 machine.)
      const __m256i u = _mm256_castps_si256(p);
      const __m256i r = _mm256_srli_epi32(
          _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                               _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)))),
          16);
      const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(a.param_bf16_out + i), packed);
      if (_mm256_movemask_ps(_mm256_cmp_ps(p, p, _CMP_UNORD_Q))) {
        for (int k = 0; k < 8; ++k) a.param_bf16_out[i + k] = FloatToBf16(a.param[i + k]);
      }
    }
  }
  ScalarRange(a, c, i, end);
}

__attribute__((target("avx512f,avx512bw"))) void Avx512Range(const AdamWArgs& a, const AdamWCoeffs& c, int64_t begin,
                                                              int64_t end) {
  const __m512 b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2), omb1 = _mm512_set1_ps(c.one_minus_b1),
               omb2 = _mm512_set1_ps(c.one_minus_b2), eps = _mm512_set1_ps(c.eps), ss = _mm512_set1_ps(c.step_size),
               inv_bc2 = _mm512_set1_ps(c.inv_bc2_sqrt), decay = _mm512_set1_ps(c.decay),
               scale = _mm512_set1_ps(a.grad_scale);
  const __m512i round_bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 g;
    if (a.grad) {
      g = _mm512_loadu_ps(a.grad + i);
    } else {
      __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.grad_bf16 + i));
      g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    g = _mm512_mul_ps(g, scale);
    __m512 m = _mm512_fmadd_ps(_mm512_loadu_ps(a.exp_avg + i), b1, _mm512_mul_ps(omb1, g));
    __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(a.exp_avg_sq + i), b2, _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
    _mm512_storeu_ps(a.exp_avg + i, m);
    _mm512_storeu_ps(a.exp_avg_sq + i, v);
    __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(v), inv_bc2, eps);
    __m512 p = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(a.param + i), decay), _mm512_div_ps(_mm512_mul_ps(ss, m), denom));
    _mm512_storeu_ps(a.param + i, p);
    if (a.param_bf16_out) {
      // Round to nearest even: u + 0x7fff + ((u >> 16) & 1), then take the high half (no NaNs here
      // unless the inputs were NaN; those go through the scalar path's rule below).
      __m512i u = _mm512_castps_si512(p);
      __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(round_bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
      __m256i hi = _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
      __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.param_bf16_out + i), hi);
      if (nan) {
        for (int k = 0; k < 16; ++k) a.param_bf16_out[i + k] = FloatToBf16(a.param[i + k]);
      }
    }
  }
  ScalarRange(a, c, i, end);
}

using RangeFn = void (*)(const AdamWArgs&, const AdamWCoeffs&, int64_t, int64_t);

RangeFn Pick(CpuPath p) {
  switch (p) {
    case CpuPath::kAvx512: return Avx512Range;
    case CpuPath::kAvx2: return Avx2Range;
    case CpuPath::kScalar: return ScalarRange;
  }
  return ScalarRange;
}

// x[i] as double: fp32 widened, bf16 widened exactly.
inline double Wide(float x) { return x; }
inline double Wide(uint16_t x) { return Bf16ToFloat(x); }

// A chunk's 8 partial sums: lane k takes x[i] for i = k (mod 8), then the fixed pairwise total.
// Every path adds in this order and x^2 is exact in double, so each gives the scalar loop's bits
// (a fused multiply-add rounds once, as the separate add does).
template <typename T>
double FinishChunk(double* acc, const T* x, int64_t i, int64_t n) {
  for (; i < n; ++i) acc[i % 8] += Wide(x[i]) * Wide(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
double ChunkSumOfSquaresScalar(const T* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += Wide(x[i + k]) * Wide(x[i + k]);
  }
  return FinishChunk(acc, x, i, n);
}

// Eight values as fp32: loaded, or bf16 widened by a 16-bit shift (exact).
__attribute__((target("avx2,fma"))) inline __m256 Load8(const float* x) { return _mm256_loadu_ps(x); }
__attribute__((target("avx2,fma"))) inline __m256 Load8(const uint16_t* x) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The vector paths, K chunks of n values at once (x, x + stride, ...), each into its own 8 lanes:
// K independent chains of fused multiply-adds. One chunk alone waits on each add's latency (0.61 of
// a read-only pass's rate on this project's 2-core AVX-512 box), so whole chunks go four at a time
// (about 1.0) and only a thread's last few, or the short last chunk, one at a time. A lent H100
// host's norm pass over 2.8B offloaded bf16 gradients took 0.21 s on 16 threads, about 3x its
// memory time (benchmarks/results/gpu-2026-11-28.txt, check 4); the scalar loop reads bf16 at
// 0.30-0.36 of a read-only pass's rate here (./zpp bench adam, norm lines).
template <int K, typename T>
__attribute__((target("avx2,fma"))) void ChunksAvx2(const T* x, int64_t stride, int64_t n, double* out) {
  __m256d lo[K], hi[K];  // lanes 0-3 and 4-7
  for (int j = 0; j < K; ++j) lo[j] = hi[j] = _mm256_setzero_pd();
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < K; ++j) {
      const __m256 f = Load8(x + j * stride + i);
      const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
      lo[j] = _mm256_fmadd_pd(a, a, lo[j]);
      hi[j] = _mm256_fmadd_pd(b, b, hi[j]);
    }
  }
  for (int j = 0; j < K; ++j) {
    alignas(32) double acc[8];
    _mm256_store_pd(acc, lo[j]);
    _mm256_store_pd(acc + 4, hi[j]);
    out[j] = FinishChunk(acc, x + j * stride, n / 8 * 8, n);
  }
}

template <int K, typename T>
__attribute__((target("avx512f,avx512bw,avx2,fma"))) void ChunksAvx512(const T* x, int64_t stride, int64_t n,
                                                                          double* out) {
  __m512d a[K];
  for (int j = 0; j < K; ++j) a[j] = _mm512_setzero_pd();
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < K; ++j) {
      const __m512d w = _mm512_cvtps_pd(Load8(x + j * stride + i));
      a[j] = _mm512_fmadd_pd(w, w, a[j]);
    }
  }
  for (int j = 0; j < K; ++j) {
    alignas(64) double acc[8];
    _mm512_store_pd(acc, a[j]);
    out[j] = FinishChunk(acc, x + j * stride, n / 8 * 8, n);
  }
}

template <int K, typename T>
void ChunksScalar(const T* x, int64_t stride, int64_t n, double* out) {
  for (int j = 0; j < K; ++j) out[j] = ChunkSumOfSquaresScalar(x + j * stride, n);
}

template <int K, typename T>
auto PickChunks(CpuPath p) {
  return p == CpuPath::kAvx512 ? ChunksAvx512<K, T> : p == CpuPath::kAvx2 ? ChunksAvx2<K, T> : ChunksScalar<K, T>;
}

// fn(begin, end) over [0, n) split among `threads` threads in blocks that are multiples of `align`
// (16: 64 bytes of fp32); below `serial_below` items, on the calling thread alone.
template <typename Fn>
void Parallel(int64_t n, int threads, Fn fn, int64_t serial_below = 1 << 16, int64_t align = 16) {
  if (threads <= 1 || n < serial_below) {
    fn(0, n);
    return;
  }
  const int64_t block = ((n + threads - 1) / threads + align - 1) / align * align;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    const int64_t b = t * block, e = std::min(n, b + block);
    if (b < e) pool.emplace_back([=] { fn(b, e); });
  }
  fn(0, std::min(n, block));
  for (auto& th : pool) th.join();
}

}  // namespace

const char* CpuPathName(CpuPath p) {
  switch (p) {
    case CpuPath::kScalar: return "scalar";
    case CpuPath::kAvx2: return "avx2";
    case CpuPath::kAvx512: return "avx512";
  }
  return "?";
}

bool CpuPathAvailable(CpuPath p) {
  __builtin_cpu_init();
  switch (p) {
    case CpuPath::kScalar: return true;
    case CpuPath::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuPath::kAvx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
  return false;
}

CpuPath BestCpuPath() {
  if (CpuPathAvailable(CpuPath::kAvx512)) return CpuPath::kAvx512;
  if (CpuPathAvailable(CpuPath::kAvx2)) return CpuPath::kAvx2;
  return CpuPath::kScalar;
}

void AdamWCpu(const AdamWArgs& a, const AdamWHyper& h, CpuPath path, int threads) {
  if (!CpuPathAvailable(path)) {
    throw std::invalid_argument(std::string("AdamWCpu: path ") + CpuPathName(path) + " is not available on this CPU");
  }
  if ((a.grad == nullptr) == (a.grad_bf16 == nullptr) || !a.param || !a.exp_avg || !a.exp_avg_sq || a.n < 0) {
    throw std::invalid_argument("AdamWCpu: expected param, exp_avg, exp_avg_sq and exactly one of grad / grad_bf16");
  }
  const AdamWCoeffs c = MakeAdamWCoeffs(h);
  RangeFn fn = Pick(path);
  Parallel(a.n, threads, [&](int64_t b, int64_t e) { fn(a, c, b, e); });
}

template <typename T>
double SumOfSquaresT(const T* x, int64_t n, int threads, CpuPath path) {
  if (!CpuPathAvailable(path)) {
    throw std::invalid_argument(std::string("SumOfSquares: path ") + CpuPathName(path) +
                                " is not available on this CPU");
  }
  const auto one = PickChunks<1, T>(path), four = PickChunks<4, T>(path);
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(std::max<int64_t>(chunks, 0)), 0.0);
  auto run = [&](int64_t c0, int64_t c1) {
    int64_t c = c0;
    for (; c + 4 <= c1 && (c + 4) * kChunk <= n; c += 4) four(x + c * kChunk, kChunk, kChunk, &part[c]);
    for (; c < c1; ++c) one(x + c * kChunk, kChunk, std::min(kChunk, n - c * kChunk), &part[c]);
  };
  Parallel(chunks, threads, run, /*serial_below=*/2, /*align=*/1);  // whole chunks to each thread
  double sum = 0;
  for (double p : part) sum += p;
  return sum;
}

double SumOfSquares(const float* x, int64_t n, int threads, CpuPath path) { return SumOfSquaresT(x, n, threads, path); }

double SumOfSquaresBf16(const uint16_t* x, int64_t n, int threads, CpuPath path) {
  return SumOfSquaresT(x, n, threads, path);
}

void CastFloatToBf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

void CastBf16ToFloat(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

}  // namespace kernels
}  // namespace zeropp
