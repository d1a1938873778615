/* TEMPORARY shim until the tree-home branch lands its quote.h.  */
#ifndef SEALED_PROBE_QUOTE_H
#define SEALED_PROBE_QUOTE_H
#include "../../src/seed/seed_fs.h"
#define sp_quote_name sp_seed_quote
#endif
