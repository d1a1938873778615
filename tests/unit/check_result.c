#include "sp_check.h"
static Suite *
make_suite (void)
{
  return suite_create ("check_result");
}
SP_CHECK_MAIN (make_suite)
