/* Each verb's options as --help prints them: generated at build time from
   the verb's section of sealed-probe-proxy(8) by man/help_text.py, so that
   the page and --help cannot drift.  */
#ifndef SP_PROXY_HELP_H
#define SP_PROXY_HELP_H

/* The options of verb, an entry each with its meaning and default, or NULL
   for a verb the page does not document.  */
const char *sp_proxy_help_options (const char *verb);

#endif
