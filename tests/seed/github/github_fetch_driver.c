/* Test-only driver for sp_github_fetch: the end-to-end test runs it against
   its own loopback HTTPS server.  The token comes from $SP_TEST_TOKEN, never
   argv.  Prints the commit on success, the error on failure; exits 0 or 1.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "seed/github_fetch.h"

static uint64_t
number (const char *s)
{
  char *end;
  unsigned long long v = strtoull (s, &end, 10);

  if (*s == '\0' || *end != '\0')
    {
      fprintf (stderr, "github-fetch-driver: not a number: %s\n", s);
      exit (2);
    }
  return v;
}

int
main (int argc, char **argv)
{
  static const struct option options[] = {
    { "api-base", required_argument, NULL, 'a' },
    { "codeload-host", required_argument, NULL, 'c' },
    { "ref", required_argument, NULL, 'r' },
    { "repo", required_argument, NULL, 'p' },
    { "ca", required_argument, NULL, 'f' },
    { "out", required_argument, NULL, 'o' },
    { "max-tarball", required_argument, NULL, 't' },
    { "max-entries", required_argument, NULL, 'e' },
    { "max-tree-bytes", required_argument, NULL, 'b' },
    { NULL, 0, NULL, 0 },
  };
  struct sp_github_source source = {
    .ref = "HEAD",
    .max_tarball_bytes = SP_GITHUB_DEFAULT_MAX_TARBALL_BYTES,
    .max_entries = SP_GITHUB_DEFAULT_MAX_ENTRIES,
    .max_tree_bytes = SP_GITHUB_DEFAULT_MAX_TREE_BYTES,
  };
  cleanup_error sp_error_t err = NULL;
  cleanup_close int outfd = -1;
  cleanup_free char *token = NULL;
  char commit[SP_COMMIT_HEX_MAX + 1];
  const char *repo = NULL, *out = NULL;
  int opt, ret;

  while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1)
    switch (opt)
      {
      case 'a':
        source.api_base = optarg;
        break;
      case 'c':
        source.codeload_host = optarg;
        break;
      case 'r':
        source.ref = optarg;
        break;
      case 'p':
        repo = optarg;
        break;
      case 'f':
        source.ca_file = optarg;
        break;
      case 'o':
        out = optarg;
        break;
      case 't':
        source.max_tarball_bytes = number (optarg);
        break;
      case 'e':
        source.max_entries = number (optarg);
        break;
      case 'b':
        source.max_tree_bytes = number (optarg);
        break;
      default:
        return 2;
      }
  if (repo == NULL || out == NULL)
    {
      fprintf (stderr, "usage: github-fetch-driver --api-base URL --codeload-host HOST --repo O/R --out DIR "
                       "[--ref REF] [--ca FILE] [--max-tarball N] [--max-entries N] [--max-tree-bytes N]\n");
      return 2;
    }
  if (getenv ("SP_TEST_TOKEN") != NULL)
    {
      token = strdup (getenv ("SP_TEST_TOKEN"));
      if (token == NULL)
        return 2;
      unsetenv ("SP_TEST_TOKEN");
      source.token = token;
    }
  outfd = open (out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (outfd < 0)
    {
      perror ("github-fetch-driver: open the output directory");
      return 2;
    }

  ret = sp_github_fetch (&source, repo, outfd, commit, &err);
  if (token != NULL)
    explicit_bzero (token, strlen (token));
  if (ret < 0)
    {
      fprintf (stderr, "github-fetch-driver: %s\n", sp_error_message (err));
      return 1;
    }
  printf ("%s\n", commit);
  return 0;
}
