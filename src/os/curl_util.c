/* See curl_util.h.  */
#define _GNU_SOURCE
#include "os/curl_util.h"

#include <string.h>

int
sp_curl_setopt_failed (sp_error_t *err, const char *option, CURLcode rc)
{
  return sp_make_error (err, 0, "set up libcurl (%s): %s", option, curl_easy_strerror (rc));
}

void
sp_curl_cleanupp (CURL **curl)
{
  if (*curl != NULL)
    curl_easy_cleanup (*curl);
  *curl = NULL;
}

void
sp_curl_slist_wipep (struct curl_slist **list)
{
  for (struct curl_slist *l = *list; l != NULL; l = l->next)
    if (l->data != NULL)
      explicit_bzero (l->data, strlen (l->data));
  curl_slist_free_all (*list);
  *list = NULL;
}
