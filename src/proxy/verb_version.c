/* sealed-probe-proxy version (also --version and -V): what an
   operator or a bug report needs to name this build, as runc prints its
   commit, spec and libseccomp.  The library versions are the ones loaded
   now, not the headers': a distribution upgrade shows here.  */
#define _GNU_SOURCE
#include <stdio.h>

#include <archive.h>
#include <curl/curl.h>
#include <git2.h>
#include <nettle/version.h>
#include <seccomp.h>
#include <yajl/yajl_version.h>
#include <yaml.h>
#include <zlib.h>

#include "build_commit.h"
#include "build_config.h"

#include "base/protocol.h"
#include "runtimes/runtime.h"
#include "text/config.h"

#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy version"

int
sp_verb_version (int argc, char **argv)
{
  static const enum sp_runtime backends[]
      = { SP_RUNTIME_RUNC, SP_RUNTIME_GVISOR, SP_RUNTIME_DOCKER, SP_RUNTIME_SBX };
  const struct scmp_version *seccomp = seccomp_version ();
  const curl_version_info_data *curl = curl_version_info (CURLVERSION_NOW);
  int git_major = 0, git_minor = 0, git_rev = 0;
  int yajl = yajl_version ();

  int ret = sp_options_parse ("version", USAGE, argc, argv, NULL, 0);

  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  git_libgit2_version (&git_major, &git_minor, &git_rev);
  printf ("sealed-probe-proxy %s\ncommit: %s\nprotocol: %d\nbackends:\n", PACKAGE_VERSION, SP_BUILD_COMMIT,
          SP_FRAME_VERSION_MAX);
  for (size_t i = 0; i < sizeof (backends) / sizeof (backends[0]); i++)
    {
      char accepts[384];

      sp_runtime_accepts (backends[i], accepts, sizeof (accepts));
      printf ("  %s: %s\n", sp_runtime_name (backends[i]), accepts);
    }
  printf ("libraries: libseccomp %u.%u.%u, yajl %d.%d.%d, libyaml %s, %s, libcurl %s, libgit2 %d.%d.%d, "
          "nettle %d.%d, zlib %s\n",
          seccomp ? seccomp->major : 0, seccomp ? seccomp->minor : 0, seccomp ? seccomp->micro : 0,
          yajl / 10000, yajl / 100 % 100, yajl % 100, yaml_get_version_string (), archive_version_string (),
          curl ? curl->version : "?", git_major, git_minor, git_rev, nettle_version_major (),
          nettle_version_minor (), zlibVersion ());
  return fflush (stdout) == 0 ? SP_EXIT_OK : SP_EXIT_FAIL;
}
