/* What both libcurl users (seed/github_fetch.c, runtimes/docker_api.c)
   need of it, written once: a checked curl_easy_setopt and the cleanup
   attributes for its handles.  */
#ifndef SP_OS_CURL_UTIL_H
#define SP_OS_CURL_UTIL_H

#include <curl/curl.h>

#include "base/error.h"

/* The error for a refused option: "set up libcurl (CURLOPT_X): why".
   Returns -1.  */
int sp_curl_setopt_failed (sp_error_t *err, const char *option, CURLcode rc);

/* curl_easy_setopt, returning sp_curl_setopt_failed's -1 from the calling
   function when libcurl refuses the option.  */
#define SP_CURL_SETOPT(curl, option, value, err)                                                             \
  do                                                                                                         \
    {                                                                                                        \
      CURLcode sp_rc_ = curl_easy_setopt (curl, option, value);                                              \
      if (sp_rc_ != CURLE_OK)                                                                                \
        return sp_curl_setopt_failed (err, #option, sp_rc_);                                                 \
    }                                                                                                        \
  while (0)

void sp_curl_cleanupp (CURL **curl);
#define cleanup_curl __attribute__ ((cleanup (sp_curl_cleanupp)))

/* Header lists may hold a token: every string is wiped before it goes.  */
void sp_curl_slist_wipep (struct curl_slist **list);
#define cleanup_curl_slist __attribute__ ((cleanup (sp_curl_slist_wipep)))

#endif
