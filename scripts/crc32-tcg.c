// SPDX-License-Identifier: GPL-2.0
/*
 * How fast the ICRC's CRC-32 (IEEE 802.3, reflected) runs over a 1 KiB packet three ways,
 * on the host and in a TCG guest (scripts/crc32-tcg.sh): eight bytes a table step (the
 * 6.12 kernel library's CONFIG_CRC32_SLICEBY8 on x86), sixteen bytes a step, and the
 * PCLMULQDQ folding loop of a carry-less-multiply CRC (the loop alone, four 128-bit lanes
 * folded 64 bytes a step; a whole CRC adds a final reduction, so its time is a lower
 * bound). The two table loops must agree with a bit-at-a-time CRC; ns a byte, best of
 * three passes.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <wmmintrin.h>

#define LEN 1024
#define PASSES 20000

static uint32_t tab[16][256];

static void make_tables(void)
{
	for (int i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int b = 0; b < 8; b++)
			c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
		tab[0][i] = c;
	}
	for (int k = 1; k < 16; k++)
		for (int i = 0; i < 256; i++)
			tab[k][i] = (tab[k - 1][i] >> 8) ^ tab[0][tab[k - 1][i] & 0xff];
}

static uint32_t bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int b = 0; b < 8; b++)
			crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
	}
	return crc;
}

static uint32_t word(const uint8_t *p)
{
	uint32_t w;

	memcpy(&w, p, 4);
	return w;
}

#define T(k, v) tab[k][(v) & 0xff]

static __attribute__((noinline)) uint32_t by8(uint32_t crc, const uint8_t *p, size_t n)
{
	for (; n >= 8; p += 8, n -= 8) {
		uint32_t a = word(p) ^ crc, b = word(p + 4);

		crc = T(7, a) ^ T(6, a >> 8) ^ T(5, a >> 16) ^ T(4, a >> 24) ^
		      T(3, b) ^ T(2, b >> 8) ^ T(1, b >> 16) ^ T(0, b >> 24);
	}
	return bitwise(crc, p, n);
}

static __attribute__((noinline)) uint32_t by16(uint32_t crc, const uint8_t *p, size_t n)
{
	for (; n >= 16; p += 16, n -= 16) {
		uint32_t a = word(p) ^ crc, b = word(p + 4), c = word(p + 8), d = word(p + 12);

		crc = T(15, a) ^ T(14, a >> 8) ^ T(13, a >> 16) ^ T(12, a >> 24) ^
		      T(11, b) ^ T(10, b >> 8) ^ T(9, b >> 16) ^ T(8, b >> 24) ^
		      T(7, c) ^ T(6, c >> 8) ^ T(5, c >> 16) ^ T(4, c >> 24) ^
		      T(3, d) ^ T(2, d >> 8) ^ T(1, d >> 16) ^ T(0, d >> 24);
	}
	return bitwise(crc, p, n);
}

static __attribute__((noinline)) uint32_t fold(uint32_t crc, const uint8_t *p, size_t n)
{
	/* x^(4*128+32) and x^(4*128-32) mod P, bit-reflected: the 64-byte fold's constants. */
	const __m128i k = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
	__m128i x[4];

	for (int i = 0; i < 4; i++)
		x[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
	x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(crc));
	for (p += 64, n -= 64; n >= 64; p += 64, n -= 64)
		for (int i = 0; i < 4; i++) {
			__m128i hi = _mm_clmulepi64_si128(x[i], k, 0x11);
			__m128i lo = _mm_clmulepi64_si128(x[i], k, 0x00);

			x[i] = _mm_xor_si128(_mm_xor_si128(lo, hi),
					     _mm_loadu_si128((const __m128i *)(p + 16 * i)));
		}
	x[0] = _mm_xor_si128(_mm_xor_si128(x[0], x[1]), _mm_xor_si128(x[2], x[3]));
	return (uint32_t)_mm_cvtsi128_si32(x[0]);
}

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double ns_a_byte(uint32_t (*f)(uint32_t, const uint8_t *, size_t), const uint8_t *buf)
{
	double best = 1e9;
	volatile uint32_t sink = 0;

	for (int pass = 0; pass < 3; pass++) {
		double t = seconds();

		for (int i = 0; i < PASSES; i++)
			sink += f(i, buf, LEN);
		t = (seconds() - t) / PASSES / LEN * 1e9;
		if (t < best)
			best = t;
	}
	(void)sink;
	return best;
}

int main(void)
{
	static uint8_t buf[LEN];
	uint32_t want;

	make_tables();
	for (int i = 0; i < LEN; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	want = bitwise(~0u, buf, LEN);
	if (by8(~0u, buf, LEN) != want || by16(~0u, buf, LEN) != want) {
		printf("a table loop disagrees with the bitwise CRC\n");
		return 1;
	}
	printf("CRC-32 of 1 KiB, ns a byte: eight bytes a step %.2f, sixteen %.2f, PCLMULQDQ folding loop %.2f\n",
	       ns_a_byte(by8, buf), ns_a_byte(by16, buf), ns_a_byte(fold, buf));
	return 0;
}
