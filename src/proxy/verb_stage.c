/* sealed-probe-proxy stage: the trusted staging phase.  It takes the
   credentials out of its environment first, materializes one immutable,
   sanitized seed per configured repository, records each seed's commit and
   digest in the protected state directory, and exits.  It is the only phase
   that holds credentials or touches the network.  See docs/staging.md.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "bundle/bundle.h"
#include "os/progress.h"
#include "os/state_lock.h"
#include "runtimes/runtime.h"
#include "seed/git_seed.h"
#include "seed/git_stage.h"
#include "seed/github_fetch.h"
#include "stage/catalog.h"
#include "stage/secret_cred.h"
#include "stage/secret_env.h"
#include "stage/seed_store.h"
#include "text/config.h"
#include "tree/copy.h"
#include "tree/normalize.h"
#include "tree/remove.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE                                                                                                \
  "usage: sealed-probe-proxy stage --config PATH|- [--catalog FILE] [--clone OWNER/NAME=PATH]...\n"          \
  "                                [--state DIR] [--github-api URL] [--github-codeload HOST]\n"              \
  "                                [--github-ref REF] [--github-ca FILE]"

#define fail(...) (sp_verb_report ("stage", __VA_ARGS__), SP_EXIT_FAIL)

/* An interrupted stage exits 128 + the signal's number, as a shell reports a
   command a signal ended: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.  */
#define EXIT_SIGNAL_BASE 128

/* The number of the signal that asked stage to stop, or 0.  Only the
   handler writes it; the work reads it where it counts (progress.h).  */
static volatile sig_atomic_t stop_signal;

/* The token's names, in the order they are tried.  Both are always wiped.  */
static const char *const token_names[] = { "GH_TOKEN", "GITHUB_TOKEN", NULL };

/* The token's name in $CREDENTIALS_DIRECTORY: systemd/sealed-probe-stage.service
   loads it (docs/staging.md, "Credentials").  */
#define TOKEN_CREDENTIAL "github-token"

struct stage_args
{
  const char *config;
  const char *catalog;
  const char *state;
  const char *github_api;
  const char *github_codeload;
  const char *github_ref;
  const char *github_ca;
  const char *clones[SP_CLONE_FLAGS_MAX];
  size_t n_clones;
};

/* Returns 0, SP_EXIT_USAGE after reporting, or -1 for --help.  */
static int
parse_args (int argc, char **argv, struct stage_args *a)
{
  const struct sp_option options[] = {
    { .name = "--config", .value = &a->config },
    { .name = "--catalog", .value = &a->catalog },
    { .name = "--state", .value = &a->state },
    { .name = "--github-api", .value = &a->github_api },
    { .name = "--github-codeload", .value = &a->github_codeload },
    { .name = "--github-ref", .value = &a->github_ref },
    { .name = "--github-ca", .value = &a->github_ca },
    { .name = "--clone", .list = { a->clones, &a->n_clones, SP_CLONE_FLAGS_MAX } },
  };
  int ret = sp_options_parse ("stage", USAGE, argc, argv, options, sizeof (options) / sizeof (options[0]));

  if (ret != 0)
    return ret;
  if (a->config == NULL)
    return sp_options_usage_error ("stage", USAGE, "--config is required");
  if (a->state == NULL)
    a->state = SP_DEFAULT_STATE;
  if (a->github_api == NULL)
    a->github_api = "https://api.github.com";
  if (a->github_codeload == NULL)
    a->github_codeload = "codeload.github.com";
  if (a->github_ref == NULL)
    a->github_ref = "HEAD";
  return 0;
}

/* True when an executable named name is on PATH.  Staging never runs it: it
   holds credentials, and runs no child at all.  */
static int
on_path (const char *name)
{
  const char *path = getenv ("PATH");
  cleanup_free char *copy = strdup (path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  char *save = NULL;

  for (char *dir = copy ? strtok_r (copy, ":", &save) : NULL; dir; dir = strtok_r (NULL, ":", &save))
    {
      cleanup_free char *full = NULL;

      if (asprintf (&full, "%s/%s", dir, name) >= 0 && access (full, X_OK) == 0)
        return 1;
    }
  return 0;
}

/* The checks the issue calls preflight: every one is an operator error before
   any seed is made.  (The config loader has already refused unsafe or
   duplicate repositories, bad limits and unknown interpreters.)  */
static int
preflight (const struct sp_config *config, const struct sp_catalog *catalog, const char *token,
           sp_error_t *err)
{
  const char *binary = sp_runtime_binary_name (config->runtime);

  if (binary == NULL)
    return sp_make_error (err, 0,
                          "sealedProbes.runtime: `%s` is not supported by this build; the proxy never falls "
                          "back to another runtime",
                          sp_runtime_name (config->runtime));
  if (binary[0] != '\0' && !on_path (binary))
    return sp_make_error (err, 0, "sealedProbes.runtime: `%s` is not installed (no %s on PATH)",
                          sp_runtime_name (config->runtime), binary);
  for (size_t i = 0; i < config->n_private_repos; i++)
    if (sp_catalog_lookup (catalog, config->private_repos[i]) == NULL && token == NULL)
      return sp_make_error (
          err, 0,
          "credentials: `%s` has no local clone (--clone or --catalog), so it is staged from "
          "GitHub, which needs a token: the credential `" TOKEN_CREDENTIAL
          "` in $" SP_CREDENTIALS_DIRECTORY_ENV ", GH_TOKEN or GITHUB_TOKEN; none is given",
          config->private_repos[i]);
  return 0;
}

static void
on_stop_signal (int sig)
{
  if (stop_signal == 0)
    stop_signal = sig;
}

/* Ctrl-C (SIGINT), a stop (SIGTERM: systemd, kill) and a dropped terminal
   (SIGHUP) each stop staging the same way: the handler only sets the flag,
   and the work, which checks it where it counts, fails with "interrupted",
   so that the run unwinds through the failure path that removes it
   (docs/staging.md, "Interrupted").  No SA_RESTART, so that a blocking wait
   (libcurl's poll) returns at once.  A signal ignored on entry (nohup's
   SIGHUP) stays ignored.  */
static int
catch_stop_signals (sp_error_t *err)
{
  static const int signals[] = { SIGINT, SIGTERM, SIGHUP };
  struct sigaction action = { .sa_handler = on_stop_signal };
  sigset_t set;

  sigemptyset (&action.sa_mask);
  sigemptyset (&set);
  for (size_t i = 0; i < sizeof (signals) / sizeof (signals[0]); i++)
    {
      struct sigaction old;

      if (sigaction (signals[i], NULL, &old) < 0)
        return sp_make_error (err, errno, "signals: read the action of %d", signals[i]);
      if (old.sa_handler == SIG_IGN)
        continue;
      if (sigaction (signals[i], &action, NULL) < 0)
        return sp_make_error (err, errno, "signals: catch %d", signals[i]);
      sigaddset (&set, signals[i]);
    }
  /* Blocked by whoever started stage, the handler would never run.  */
  if (sigprocmask (SIG_UNBLOCK, &set, NULL) < 0)
    return sp_make_error (err, errno, "signals: unblock");
  return 0;
}

/* A tree walk's meter (normalization, the digest): each entry counted on
   the progress line, and a place an interrupt stops the walk.  */
static int
count_and_check (void *ctx, uint64_t bytes, sp_error_t *err)
{
  struct sp_progress *progress = ctx;

  sp_progress_add (progress, 1, bytes);
  return sp_progress_check (progress, err);
}

/* Produces seeds/RUN/INDEX for one repository: a sanitized copy of its local
   clone, or its GitHub tarball; then the seed policy (tree/normalize.h), which
   gives it to the probe uid.  The read-only mount, not its modes, keeps it
   unchanged.  */
/* A local clone's seed: its `.git` copied (but the submodules'
   repositories), sanitized, and its commit written.  The gitlinks the
   policy omits are recorded in the seed.  */
static int
stage_clone (int clone_fd, int seed_fd, struct sp_seed *seed, enum sp_submodule_policy policy,
             const struct sp_copy_options *limits, const char *clone, sp_error_t *err)
{
  cleanup_git_submodules struct sp_git_submodules sub = { .policy = policy };
  size_t uncommitted = 0;

  if (sp_git_copy_gitdir (clone_fd, seed_fd, limits, &sub, err) < 0
      || sp_progress_check (limits->progress, err) < 0 || sp_git_sanitize (seed_fd, seed->commit, err) < 0
      || sp_progress_check (limits->progress, err) < 0
      || sp_git_count_uncommitted (clone_fd, seed_fd, seed->commit, &uncommitted, err) < 0
      || sp_git_stage_commit (seed_fd, seed->commit, limits, &sub, err) < 0)
    return -1;
  /* Staged anyway, as documented; said, so that no operator believes an
     edit is in the seed.  A count, never a path: the names are the private
     repository's (docs/threat-model.md).  */
  if (uncommitted > 0)
    {
      sp_progress_clear (limits->progress);
      sp_verb_report ("stage",
                      "warning: %s: local clone `%s` has uncommitted changes (%zu path(s)): only its "
                      "committed HEAD %s is staged, not the changes; commit them and stage again to include "
                      "them",
                      seed->repo, clone, uncommitted, seed->commit);
    }
  seed->omitted_known = true;
  seed->omitted = get_and_reset (&sub.omitted);
  seed->n_omitted = sub.n_omitted;
  sub.n_omitted = 0;
  return 0;
}

static int
stage_one (int run_fd, struct sp_seed *seed, const char *clone, enum sp_submodule_policy policy,
           const struct sp_github_source *github, struct sp_progress *progress, sp_error_t *err)
{
  const struct sp_copy_options limits = {
    .max_bytes = SP_SEED_MAX_BYTES,
    .max_entries = SP_SEED_MAX_ENTRIES,
    .max_depth = SP_SEED_MAX_DEPTH,
    .progress = progress,
  };
  cleanup_close int seed_fd = -1;
  char name[16];

  snprintf (name, sizeof (name), "%u", seed->index);
  if (mkdirat (run_fd, name, 0700) < 0)
    return sp_make_error (err, errno, "seed directory");
  seed_fd = openat (run_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (seed_fd < 0)
    return sp_make_error (err, errno, "seed directory");

  if (clone != NULL)
    {
      /* The operator's path is trusted; what is under it is not.  */
      cleanup_close int clone_fd = open (clone, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

      seed->source = SP_SEED_LOCAL;
      /* Recorded, so that status can say when the clone moved on.  */
      free (seed->clone);
      if ((seed->clone = strdup (clone)) == NULL)
        return sp_make_error (err, ENOMEM, "local clone `%s`", clone);
      if (clone_fd < 0)
        return sp_make_error (err, errno, "local clone `%s`", clone);
      /* The commit, never the working tree: only `.git` is copied, and
         the tree HEAD names is written from it (docs/staging.md).  */
      if (stage_clone (clone_fd, seed_fd, seed, policy, &limits, clone, err) < 0)
        return sp_error_wrap (err, "local clone `%s`", clone);
    }
  else
    {
      seed->source = SP_SEED_GITHUB;
      if (sp_github_fetch (github, seed->repo, seed_fd, seed->commit, err) < 0)
        return -1;
      /* A tarball's submodules are empty directories nothing marks: what
         the seed omits is not known, and reject can go only by
         `.gitmodules`.  */
      if (policy == SP_SUBMODULES_REJECT && sp_git_refuse_gitmodules (seed_fd, err) < 0)
        return sp_error_wrap (err, "github");
    }
  if (sp_progress_check (progress, err) < 0)
    return -1;
  /* Owned by the probe and owner-writable, so that an overlay snapshot is
     writable in the sandbox; the seed itself stays immutable through its
     read-only mount and the 0700 state directory (docs/staging.md).  */
  sp_progress_phase (progress, "normalize", SP_PROGRESS_FILES, 0);
  if (sp_tree_normalize_counted (seed_fd, &sp_seed_policy, count_and_check, progress, err) < 0)
    return sp_error_wrap (err, "normalize the seed");
  return sp_progress_check (progress, err);
}

/* What a run made, for its removal should it fail, and what it was doing.  */
struct stage_run
{
  bool made_seeds_dir; /* seeds/ did not exist before this run */
  const char *current; /* the repository being staged, or NULL */
};

/* Seeds are made in two passes: GitHub's first, with the token; then the
   token is wiped, and only then are local clones read.  libgit2 parses a
   clone's objects, so it never runs while a credential is in memory.  The
   work checks for a stop request where it counts, and here between steps.  */
static int
stage_all (int state_fd, const struct sp_config *config, const struct sp_catalog *catalog,
           struct sp_github_source *github, char **token, struct sp_staged *staged,
           struct sp_progress *progress, struct stage_run *made, sp_error_t *err)
{
  cleanup_close int seeds_fd = -1;
  cleanup_close int run_fd = -1;

  if (sp_progress_check (progress, err) < 0)
    return -1;
  if (mkdirat (state_fd, SP_SEEDS_DIR, 0700) == 0)
    made->made_seeds_dir = true;
  else if (errno != EEXIST)
    return sp_make_error (err, errno, "%s", SP_SEEDS_DIR);
  seeds_fd = openat (state_fd, SP_SEEDS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (seeds_fd < 0)
    return sp_make_error (err, errno, "%s", SP_SEEDS_DIR);
  if (mkdirat (seeds_fd, staged->run, 0700) < 0)
    return sp_make_error (err, errno, "%s/%s", SP_SEEDS_DIR, staged->run);
  run_fd = openat (seeds_fd, staged->run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (run_fd < 0)
    return sp_make_error (err, errno, "%s/%s", SP_SEEDS_DIR, staged->run);

  for (int local_pass = 0; local_pass <= 1; local_pass++)
    {
      if (local_pass)
        {
          sp_secret_freep (token);
          github->token = NULL;
        }
      for (size_t i = 0; i < config->n_private_repos; i++)
        {
          struct sp_seed *seed = &staged->seeds[i];
          const char *clone = sp_catalog_lookup (catalog, config->private_repos[i]);

          if ((clone != NULL) != local_pass)
            continue;
          seed->repo = config->private_repos[i];
          seed->index = (unsigned)i;
          made->current = seed->repo;
          sp_progress_repo (progress, seed->repo);
          if (stage_one (run_fd, seed, clone, config->submodules[i], github, progress, err) < 0)
            return sp_error_wrap (err, "%s", seed->repo);
          sp_progress_done (progress);
          staged->n++;
        }
    }
  made->current = NULL;
  if (fchmod (run_fd, 0555) < 0)
    return sp_make_error (err, errno, "%s/%s: chmod", SP_SEEDS_DIR, staged->run);
  if (sp_seed_run_seal (state_fd, staged->run, err) < 0)
    return -1;
  /* Each digest is taken once, through the read-only mount: what is
     recorded is what every later reader sees.  */
  for (size_t i = 0; i < staged->n; i++)
    {
      made->current = staged->seeds[i].repo;
      sp_progress_repo (progress, staged->seeds[i].repo);
      sp_progress_phase (progress, "digest", SP_PROGRESS_FILES, 0);
      if (sp_seed_measure (state_fd, staged->run, &staged->seeds[i], count_and_check, progress, err) < 0
          || sp_progress_check (progress, err) < 0)
        return -1;
    }
  made->current = NULL;
  /* The last point a signal stops anything: once staged.json names the run,
     the run is staged, and stage finishes as if no signal had come.  */
  if (sp_progress_check (progress, err) < 0)
    return -1;
  return sp_staged_write (state_fd, staged, err);
}

/* A failed or interrupted stage leaves nothing: the run's mount and
   directory go, and seeds/ too when this run made it (empty by then).  The
   removal is counted on the progress line, has no path or depth limit, and
   never stops early: a second signal does not cut it short.  Returns 0 when
   nothing of the run stays, or -1 with *left saying what does.  */
static int
discard_run (int state_fd, const char *run, const struct stage_run *made, struct sp_progress *progress,
             sp_error_t *left)
{
  cleanup_close int seeds_fd
      = openat (state_fd, SP_SEEDS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  char subject[sizeof (SP_SEEDS_DIR) + SP_ID_MAX_CHARS + 1];
  char proc[64];
  int fd;

  if (seeds_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (left, errno, "%s", SP_SEEDS_DIR);
  fd = openat (seeds_fd, run, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0)
    {
      snprintf (proc, sizeof (proc), "/proc/self/fd/%d", fd);
      umount2 (proc, MNT_DETACH);
      close (fd);
    }
  snprintf (subject, sizeof (subject), "%s/%s", SP_SEEDS_DIR, run);
  sp_progress_repo (progress, subject);
  sp_progress_phase (progress, "remove", SP_PROGRESS_FILES, 0);
  if (sp_tree_remove_counted (seeds_fd, run, sp_progress_count_file, progress, left) < 0)
    return sp_error_wrap (left, "%s/%s", SP_SEEDS_DIR, run);
  /* Not empty: something else is there, which is not this run's.  */
  if (made->made_seeds_dir && unlinkat (state_fd, SP_SEEDS_DIR, AT_REMOVEDIR) < 0 && errno != ENOENT
      && errno != ENOTEMPTY && errno != EEXIST)
    return sp_make_error (left, errno, "%s: remove", SP_SEEDS_DIR);
  return 0;
}

/* The one line an interrupted stage ends with: which signal, what it was
   doing, and what is left (nothing, or what could not be removed).  It
   names only the configured repository, never anything from it.  */
static void
report_interrupted (int sig, const struct stage_run *made, const sp_error_t left)
{
  char name[SP_PROGRESS_SIGNAL_NAME_MAX];
  const char *signal_name = sp_progress_signal_name (sig, name);
  const char *during = made->current != NULL ? " while staging " : "";
  const char *repo = made->current != NULL ? made->current : "";

  if (left == NULL)
    sp_verb_report ("stage", "interrupted by %s%s%s: removed what this run made; nothing of it is left",
                    signal_name, during, repo);
  else
    sp_verb_report ("stage", "interrupted by %s%s%s: removed what this run made but %s stays; run unstage",
                    signal_name, during, repo, sp_error_message (left));
}

/* The token comes from systemd's credential or from the environment, never
   from both: two sources that may disagree are an operator error, not a
   choice to make silently.  Takes ownership of *env_token.  */
static int
take_token (char **env_token, const char *env_name, char **token, sp_error_t *err)
{
  cleanup_secret char *from_env = get_and_reset (env_token);
  cleanup_secret char *from_cred = NULL;

  if (sp_secret_cred_take (TOKEN_CREDENTIAL, SP_GITHUB_TOKEN_MAX, &from_cred, err) < 0)
    return sp_error_wrap (err, "credentials");
  if (from_cred != NULL && from_env != NULL)
    return sp_make_error (err, 0,
                          "credentials: the token is given twice, by the credential `" TOKEN_CREDENTIAL
                          "` in $" SP_CREDENTIALS_DIRECTORY_ENV " and by %s; give it one way only "
                          "(under systemd: the credential, with no token in the environment)",
                          env_name);
  *token = from_cred != NULL ? get_and_reset (&from_cred) : get_and_reset (&from_env);
  return 0;
}

int
sp_verb_stage (int argc, char **argv)
{
  /* First of all, before anything can fail or print: the token leaves the
     environment, and lives only in this copy until exit.  */
  const char *env_name = NULL;
  cleanup_secret char *env_token = sp_secret_env_take (token_names, &env_name);
  cleanup_secret char *token = NULL;
  cleanup_error sp_error_t err = NULL;
  cleanup_error sp_error_t left = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_close int state_fd = -1;
  int owner_lock_fd = -1;
  struct sp_catalog catalog = { 0 };
  struct sp_staged staged = { 0 };
  struct stage_args a = { 0 };
  struct stage_run made = { 0 };
  struct sp_github_source github;
  struct sp_progress progress;
  int ret;

  ret = parse_args (argc, argv, &a);
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (catch_stop_signals (&err) < 0)
    return fail ("%s", sp_error_message (err));
  /* First: no other complaint (a token, the config) is worth fixing before
     this one.  */
  if (geteuid () != 0)
    return fail ("not root: staging gives every seed to root and mounts it read-only: run it as root "
                 "(sudo sealed-probe-proxy stage ...)");

  /* Before the config: a bad or doubled credential stops everything, so no
     request is ever made with a token the operator did not mean.  */
  if (take_token (&env_token, env_name, &token, &err) < 0)
    return fail ("%s", sp_error_message (err));
  if (sp_verb_load_enabled_config ("stage", a.config, &config) < 0)
    return SP_EXIT_FAIL;
  ret = SP_EXIT_FAIL;
  if (a.catalog && sp_catalog_load (&catalog, config, a.catalog, &err) < 0)
    goto out;
  for (size_t i = 0; i < a.n_clones; i++)
    if (sp_catalog_add (&catalog, config, a.clones[i], "--clone", &err) < 0)
      goto out;
  /* The state directory is this stage's alone from here on: never beside a
     serve that answers from its seeds, nor another stage or an unstage.  */
  if (preflight (config, &catalog, token, &err) < 0 || sp_state_open (a.state, 1, &state_fd, &err) < 0
      || sp_state_lock_take (state_fd, a.state, "stage", &owner_lock_fd, &err) < 0
      || sp_bundle_id_make (NULL, staged.run, &err) < 0)
    goto out;

  github = (struct sp_github_source){
    .api_base = a.github_api,
    .codeload_host = a.github_codeload,
    .ref = a.github_ref,
    .ca_file = a.github_ca,
    .token = token,
    .max_tarball_bytes = SP_GITHUB_DEFAULT_MAX_TARBALL_BYTES,
    .max_entries = SP_GITHUB_DEFAULT_MAX_ENTRIES,
    .max_tree_bytes = SP_GITHUB_DEFAULT_MAX_TREE_BYTES,
    .progress = &progress,
  };
  staged.seeds = calloc (config->n_private_repos, sizeof (*staged.seeds));
  if (staged.seeds == NULL)
    {
      sp_make_error (&err, ENOMEM, "seeds");
      goto out;
    }
  /* On a terminal only; elsewhere stage prints exactly what it always has.  */
  sp_progress_init (&progress, STDERR_FILENO);
  sp_progress_stop_on (&progress, &stop_signal);
  ret = stage_all (state_fd, config, &catalog, &github, &token, &staged, &progress, &made, &err);
  if (ret < 0)
    {
      /* Read once: a signal during the removal changes nothing.  */
      int sig = stop_signal;

      if (discard_run (state_fd, staged.run, &made, &progress, &left) < 0 && sig == 0)
        {
          cleanup_error sp_error_t stage_err = get_and_reset (&err);

          sp_make_error (&err, 0, "%s (and the failed run stays: %s; run unstage)",
                         sp_error_message (stage_err), sp_error_message (left));
        }
      sp_progress_clear (&progress);
      if (sig == 0)
        {
          ret = SP_EXIT_FAIL;
          goto out;
        }
      /* What interrupted work failed with is only a consequence.  */
      sp_error_release (&err);
      report_interrupted (sig, &made, left);
      ret = EXIT_SIGNAL_BASE + sig;
      goto out;
    }
  sp_progress_clear (&progress);
  for (size_t i = 0; i < staged.n; i++)
    printf ("staged %s from %s: commit %s, %s\n", staged.seeds[i].repo,
            sp_seed_source_name (staged.seeds[i].source), staged.seeds[i].commit, staged.seeds[i].digest);
  printf ("staged run %s: %zu seed(s) in %s/%s/%s, recorded in %s/%s\n", staged.run, staged.n, a.state,
          SP_SEEDS_DIR, staged.run, a.state, SP_STAGED_FILE);
  ret = fflush (stdout) == 0 ? SP_EXIT_OK : SP_EXIT_FAIL;

out:
  sp_state_lock_release (state_fd, &owner_lock_fd);
  if (err)
    sp_verb_report ("stage", "%s", sp_error_message (err));
  /* The repository names belong to config; the array and the omitted
     paths are ours.  */
  for (size_t i = 0; staged.seeds != NULL && i < config->n_private_repos; i++)
    {
      sp_seed_omitted_release (&staged.seeds[i]);
      free (staged.seeds[i].clone);
    }
  free (staged.seeds);
  sp_catalog_release (&catalog);
  return ret;
}
