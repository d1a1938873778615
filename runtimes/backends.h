/* What runtime.c needs from each backend file: its open function.  Private
   to runtimes/.  */
#ifndef SEALED_PROBE_RUNTIMES_BACKENDS_H
#define SEALED_PROBE_RUNTIMES_BACKENDS_H

#include <sealed-probe/runtime.h>

int sp_runc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                  sp_error_t *err);
int sp_docker_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                    sp_error_t *err);
int sp_runsc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                   sp_error_t *err);

int sp_sbx_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out,
                 sp_error_t *err);

#endif
