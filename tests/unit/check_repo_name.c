#include "sp_check.h"
static Suite *
make_suite (void)
{
  return suite_create ("check_repo_name");
}
SP_CHECK_MAIN (make_suite)
