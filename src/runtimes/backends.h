/* What runtime.c needs from each backend file: its open function, and what
   its verify accepts, in words.  Private to runtimes/.  */
#ifndef SP_RUNTIMES_BACKENDS_H
#define SP_RUNTIMES_BACKENDS_H

#include "runtimes/runtime.h"

int sp_runc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                  sp_error_t *err);
int sp_docker_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                    sp_error_t *err);
int sp_runsc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                   sp_error_t *err);

int sp_sbx_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                 sp_error_t *err);

void sp_runc_accepts (char *out, size_t size);
void sp_runsc_accepts (char *out, size_t size);
void sp_docker_accepts (char *out, size_t size);
void sp_sbx_accepts (char *out, size_t size);

#endif
