#include "sp_check.h"
static Suite *
make_suite (void)
{
  return suite_create ("check_ledger");
}
SP_CHECK_MAIN (make_suite)
