/* What runtime.c needs from each backend file: its open function.  Private
   to runtimes/.  */
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

#endif
