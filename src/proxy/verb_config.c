#include "verbs.h"
int
sp_verb_config (int argc, char **argv)
{
  return SP_EXIT_FAIL;
}
