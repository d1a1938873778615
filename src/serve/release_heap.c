/* See release_heap.h.  */
#include "serve/release_heap.h"

static void
swap (struct sp_release_held *a, struct sp_release_held *b)
{
  struct sp_release_held t = *a;

  *a = *b;
  *b = t;
}

void
sp_release_heap_push (struct sp_release_heap *h, struct sp_release_held item)
{
  size_t i = h->len++;

  h->items[i] = item;
  while (i > 0 && h->items[(i - 1) / 2].at_ns > h->items[i].at_ns)
    {
      swap (&h->items[i], &h->items[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
}

struct sp_release_held
sp_release_heap_pop (struct sp_release_heap *h)
{
  struct sp_release_held top = h->items[0];
  size_t i = 0;

  h->items[0] = h->items[--h->len];
  for (;;)
    {
      size_t l = 2 * i + 1, r = l + 1, m = i;

      if (l < h->len && h->items[l].at_ns < h->items[m].at_ns)
        m = l;
      if (r < h->len && h->items[r].at_ns < h->items[m].at_ns)
        m = r;
      if (m == i)
        return top;
      swap (&h->items[i], &h->items[m]);
      i = m;
    }
}
