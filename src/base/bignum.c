/* Fixed-width unsigned big integers: see src/base/bignum.h.  Schoolbook
   arithmetic on 32-bit limbs with 64-bit intermediates: the operands are at
   most 33 limbs, so nothing cleverer pays.  */
#include "base/bignum.h"

#include <string.h>

void
sp_bignum_set_u64 (struct sp_bignum *n, uint64_t value)
{
  memset (n, 0, sizeof *n);
  n->limb[0] = (uint32_t)value;
  n->limb[1] = (uint32_t)(value >> 32);
}

bool
sp_bignum_set_pow2 (struct sp_bignum *n, unsigned exponent)
{
  if (exponent >= SP_BIGNUM_BITS)
    return false;
  memset (n, 0, sizeof *n);
  n->limb[exponent / 32] = (uint32_t)1 << (exponent % 32);
  return true;
}

int
sp_bignum_cmp (const struct sp_bignum *a, const struct sp_bignum *b)
{
  for (size_t i = SP_BIGNUM_LIMBS; i-- > 0;)
    {
      if (a->limb[i] != b->limb[i])
        return a->limb[i] < b->limb[i] ? -1 : 1;
    }
  return 0;
}

bool
sp_bignum_add (struct sp_bignum *out, const struct sp_bignum *a, const struct sp_bignum *b)
{
  uint64_t carry = 0;

  for (size_t i = 0; i < SP_BIGNUM_LIMBS; i++)
    {
      uint64_t sum = (uint64_t)a->limb[i] + b->limb[i] + carry;

      out->limb[i] = (uint32_t)sum;
      carry = sum >> 32;
    }
  return carry == 0;
}

bool
sp_bignum_mul (struct sp_bignum *out, const struct sp_bignum *a, const struct sp_bignum *b)
{
  /* The full product, twice the width, so that overflow is seen rather than
     inferred; out may alias an operand, so it is written only at the end.  */
  uint32_t wide[2 * SP_BIGNUM_LIMBS] = { 0 };

  for (size_t i = 0; i < SP_BIGNUM_LIMBS; i++)
    {
      uint64_t carry = 0;

      if (a->limb[i] == 0)
        continue;
      for (size_t j = 0; j < SP_BIGNUM_LIMBS; j++)
        {
          uint64_t t = (uint64_t)a->limb[i] * b->limb[j] + wide[i + j] + carry;

          wide[i + j] = (uint32_t)t;
          carry = t >> 32;
        }
      wide[i + SP_BIGNUM_LIMBS] = (uint32_t)carry;
    }
  for (size_t k = SP_BIGNUM_LIMBS; k < 2 * SP_BIGNUM_LIMBS; k++)
    if (wide[k] != 0)
      return false;
  memcpy (out->limb, wide, sizeof out->limb);
  return true;
}

unsigned
sp_bignum_bit_length (const struct sp_bignum *n)
{
  for (size_t i = SP_BIGNUM_LIMBS; i-- > 0;)
    {
      uint32_t v = n->limb[i];
      unsigned bits = 0;

      if (v == 0)
        continue;
      while (v != 0)
        {
          bits++;
          v >>= 1;
        }
      return (unsigned)(i * 32) + bits;
    }
  return 0;
}

bool
sp_bignum_is_zero (const struct sp_bignum *n)
{
  return sp_bignum_bit_length (n) == 0;
}

bool
sp_bignum_is_pow2 (const struct sp_bignum *n)
{
  unsigned set = 0;

  for (size_t i = 0; i < SP_BIGNUM_LIMBS; i++)
    set += (unsigned)__builtin_popcount (n->limb[i]);
  return set == 1;
}

/* n = n / divisor, returning the remainder.  */
static uint32_t
divide_small (struct sp_bignum *n, uint32_t divisor)
{
  uint64_t rest = 0;

  for (size_t i = SP_BIGNUM_LIMBS; i-- > 0;)
    {
      uint64_t cur = (rest << 32) | n->limb[i];

      n->limb[i] = (uint32_t)(cur / divisor);
      rest = cur % divisor;
    }
  return (uint32_t)rest;
}

size_t
sp_bignum_decimal (const struct sp_bignum *n, char *buf, size_t cap)
{
  char digits[SP_BIGNUM_DECIMAL_MAX];
  struct sp_bignum rest = *n;
  size_t len = 0;

  do
    digits[len++] = (char)('0' + divide_small (&rest, 10));
  while (!sp_bignum_is_zero (&rest) && len < sizeof digits);
  if (len + 1 > cap)
    return 0;
  for (size_t i = 0; i < len; i++)
    buf[i] = digits[len - 1 - i];
  buf[len] = '\0';
  return len;
}
