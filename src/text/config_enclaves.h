/* The agent firewall's current config: a top-level `enclaves` list of
   executor entries (its src/parsers/enclave-parser.ts and
   src/enclave/preflight.ts), read onto this proxy's settings.  This proxy
   runs one script enclave: exactly one entry, a `script` one.  Every key is
   checked with the firewall's bound or a tighter one of this proxy's, and
   the keys this proxy enforces with a fixed limit of its own (pidsLimit,
   cpuLimit, tmpfsLimit, maxOutputBytes) are accepted only when that limit
   is at least as strict as the one asked.  docs/config.md, "The enclaves
   document", has the table.  */
#ifndef SP_TEXT_CONFIG_ENCLAVES_H
#define SP_TEXT_CONFIG_ENCLAVES_H

#include "base/error.h"
#include "text/config.h"
#include "text/json.h"

#define SP_CONFIG_ENCLAVES_KEY "enclaves"

/* Reads the value of the document's `enclaves` key into c, which holds the
   defaults.  On success c is enabled, has_block, form
   SP_CONFIG_FORM_ENCLAVES.  Errors read "enclaves[0].timeout: <reason>";
   they may quote a key, never a string value.  Pure.  */
int sp_config_read_enclaves (const struct sp_json *list, struct sp_config *c, sp_error_t *err);

#endif
