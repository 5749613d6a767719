/* Non-temporal row stores for the CPU backend (part of tile-backends-cpu).
 *
 * A kernel that writes an output far larger than the last-level cache with ordinary stores
 * makes the CPU read every destination line from memory before overwriting it (write
 * allocate): a row softmax moves three bytes per byte of output instead of two. The
 * stream_stores pass makes such a kernel compute each output row into its block-local buffer
 * and hand the row here, where whole 64-byte lines go to memory with movntdq, bypassing the
 * caches. Built with baseline x86-64 flags (SSE2), so it runs on any x86-64 CPU.
 */
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

/* dst[0, bytes) = src[0, bytes); the ranges do not overlap. Returns 0. */
int tile_stream_store(void* dst, const void* src, long bytes) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  if (bytes <= 0) return 0;
#if defined(__x86_64__) || defined(__i386__)
  long head = (long)((64 - ((uintptr_t)d & 63)) & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, (size_t)head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    __m128i v0 = _mm_loadu_si128((const __m128i*)(const void*)s);
    __m128i v1 = _mm_loadu_si128((const __m128i*)(const void*)(s + 16));
    __m128i v2 = _mm_loadu_si128((const __m128i*)(const void*)(s + 32));
    __m128i v3 = _mm_loadu_si128((const __m128i*)(const void*)(s + 48));
    _mm_stream_si128((__m128i*)(void*)d, v0);
    _mm_stream_si128((__m128i*)(void*)(d + 16), v1);
    _mm_stream_si128((__m128i*)(void*)(d + 32), v2);
    _mm_stream_si128((__m128i*)(void*)(d + 48), v3);
  }
  /* Streaming stores are weakly ordered: fence them before anything else may read the row. */
  _mm_sfence();
#endif
  memcpy(d, s, (size_t)bytes);
  return 0;
}
