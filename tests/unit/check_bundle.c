/* The bundle generator's own rules: ids, the spec it refuses, determinism, and
   the files sp_bundle_write creates.  tests/integration/ asserts each field of
   config.json by name through the dry-run verb.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "bundle/bundle.h"

#include "sp_check.h"

static struct sp_seccomp_profile *profile;

static void
load_profile (void)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_seccomp_profile_load_builtin (&profile, &err) < 0)
    ck_abort_msg ("builtin seccomp profile: %s", sp_error_message (err));
}

static void
free_profile (void)
{
  sp_seccomp_profile_free (profile);
  profile = NULL;
}

static struct sp_bundle_spec
good_spec (void)
{
  return (struct sp_bundle_spec){
    .bundle_dir = "/run/sealed-probe/inv/abc",
    .rootfs_root = "/var/lib/sealed-probe/rootfs/root",
    .rootfs_digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    .run_id = "r1",
    .invocation_id = "7",
    .memory_limit_bytes = 512ULL << 20,
    .interpreter = SP_INTERPRETER_PYTHON3,
    .seccomp = profile,
    .host_root_id = SP_PROBE_ID_BASE_DEFAULT,
    .host_probe_id = SP_PROBE_ID_BASE_DEFAULT + 1,
  };
}

static char *
render_fails (const struct sp_bundle_spec *spec)
{
  cleanup_error sp_error_t err = NULL;
  char *json = NULL;
  size_t len;

  ck_assert_int_lt (sp_bundle_render_config (spec, &json, &len, &err), 0);
  ck_assert_ptr_null (json);
  return strdup (sp_error_message (err));
}

static const struct
{
  const char *id;
  int ok;
} ids[] = {
  { "a", 1 },          { "0123456789abcdef", 1 },
  { "dry-0a1b2c", 1 }, { "abcdefghijklmnopqrstuvwxyz012345", 1 },
  { "", 0 },           { "abcdefghijklmnopqrstuvwxyz0123456", 0 },
  { "A", 0 },          { "a_b", 0 },
  { "a/b", 0 },        { "a b", 0 },
  { "..", 0 },         { "a\n", 0 },
};

START_TEST (test_id_check)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg ((sp_bundle_id_check (ids[_i].id, &err) == 0) == ids[_i].ok, "id `%s`", ids[_i].id);
}
END_TEST

START_TEST (test_container_id)
{
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *id = sp_bundle_container_id (&spec);

  ck_assert_str_eq (id, "sp-r1-7");
}
END_TEST

START_TEST (test_render_is_deterministic)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *a = NULL;
  cleanup_free char *b = NULL;
  size_t a_len, b_len;

  ck_assert_int_eq (sp_bundle_render_config (&spec, &a, &a_len, &err), 0);
  ck_assert_int_eq (sp_bundle_render_config (&spec, &b, &b_len, &err), 0);
  ck_assert_uint_eq (a_len, b_len);
  ck_assert_mem_eq (a, b, a_len);
  ck_assert_ptr_nonnull (strstr (a, "\"path\": \"/var/lib/sealed-probe/rootfs/root\""));
  ck_assert_ptr_nonnull (strstr (a, "\"source\": \"/run/sealed-probe/inv/abc/repo\""));
  ck_assert_ptr_nonnull (strstr (a, "\"cgroupsPath\": \"/sealed-probe/r1-7\""));
}
END_TEST

/* tmp_on_host (gvisor): /tmp becomes a noexec rw bind of the bundle's tmp/,
   and nothing else changes; without it, /tmp is runc's capped tmpfs.  */
START_TEST (test_render_tmp_on_host_binds_the_bundles_tmp)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *plain = NULL;
  cleanup_free char *bound = NULL;
  size_t plain_len, bound_len;
  static const char tmpfs_entry[]
      = "\"destination\": \"/tmp\",\n      \"type\": \"tmpfs\",\n      \"source\": \"tmpfs\"";
  static const char bind_entry[]
      = "\"destination\": \"/tmp\",\n      \"type\": \"bind\",\n      \"source\": "
        "\"/run/sealed-probe/inv/abc/tmp\",\n      \"options\": [\n        \"bind\",\n        \"rw\",\n"
        "        \"nosuid\",\n        \"nodev\",\n        \"noexec\"\n      ]";

  ck_assert_int_eq (sp_bundle_render_config (&spec, &plain, &plain_len, &err), 0);
  ck_assert_msg (strstr (plain, tmpfs_entry) != NULL, "%s", plain);
  ck_assert_ptr_null (strstr (plain, "inv/abc/tmp"));
  spec.rules.tmp_on_host = true;
  ck_assert_int_eq (sp_bundle_render_config (&spec, &bound, &bound_len, &err), 0);
  ck_assert_msg (strstr (bound, bind_entry) != NULL, "%s", bound);
  ck_assert_ptr_null (strstr (bound, tmpfs_entry));
  ck_assert_ptr_null (strstr (bound, "nr_inodes"));
}
END_TEST

/* repo_exclusive (gvisor): the annotations gain the mount hint that names
   /probe/repo's source, and nothing else changes; no hint names another
   mount's source (probe.py, out and /tmp stay shared).  */
START_TEST (test_render_repo_exclusive_hints_the_repository_alone)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *plain = NULL;
  cleanup_free char *hinted = NULL;
  size_t plain_len, hinted_len;
  static const char hint[]
      = "\"" SP_GVISOR_REPO_HINT "share\": \"container\",\n    \"" SP_GVISOR_REPO_HINT
        "type\": \"bind\",\n    \"" SP_GVISOR_REPO_HINT "source\": \"/run/sealed-probe/inv/abc/repo\"\n  }";

  ck_assert_int_eq (sp_bundle_render_config (&spec, &plain, &plain_len, &err), 0);
  ck_assert_ptr_null (strstr (plain, "dev.gvisor."));
  spec.rules.repo_exclusive = true;
  ck_assert_int_eq (sp_bundle_render_config (&spec, &hinted, &hinted_len, &err), 0);
  ck_assert_msg (strstr (hinted, hint) != NULL, "%s", hinted);
  /* One hint, three keys: the rest of the document is the plain one.  */
  ck_assert_uint_eq (hinted_len, plain_len + strlen (hint) - strlen ("\n  }") + strlen (",\n    "));
  ck_assert_ptr_null (strstr (hinted, "dev.gvisor.spec.mount.probe"));
  ck_assert_ptr_null (strstr (hinted, "dev.gvisor.spec.mount.out"));
}
END_TEST

/* maskedPaths: the host's /proc top level but the allowed links and the
   processes, plus /proc/sys and /sys whole; masks_by_mount (gvisor) adds the
   covers and makes /sys a tmpfs.  */
START_TEST (test_render_masks_host_wide_state)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *plain = NULL;
  cleanup_free char *covered = NULL;
  size_t plain_len, covered_len;
  char self_pid[32];

  ck_assert_int_eq (sp_bundle_render_config (&spec, &plain, &plain_len, &err), 0);
  ck_assert_msg (strstr (plain, "\"/proc/sys\",") && strstr (plain, "\"/sys\"\n"), "%s", plain);
  /* Names this host's kernel lists, whatever they are.  */
  ck_assert_msg (strstr (plain, "\"/proc/version\"") && strstr (plain, "\"/proc/cpuinfo\""), "%s", plain);
  snprintf (self_pid, sizeof (self_pid), "\"/proc/%d\"", (int)getpid ());
  ck_assert_ptr_null (strstr (plain, self_pid));
  ck_assert_ptr_null (strstr (plain, "\"/proc/self\""));
  ck_assert_ptr_null (strstr (plain, "\"/proc/net\""));
  ck_assert_ptr_null (strstr (plain, "\"destination\": \"/dev/pts\""));
  ck_assert_msg (strstr (plain, "\"destination\": \"/sys\",\n      \"type\": \"sysfs\""), "%s", plain);
  spec.rules.masks_by_mount = true;
  ck_assert_int_eq (sp_bundle_render_config (&spec, &covered, &covered_len, &err), 0);
  ck_assert_msg (strstr (covered, "\"destination\": \"/sys\",\n      \"type\": \"tmpfs\""), "%s", covered);
  ck_assert_msg (strstr (covered, "\"destination\": \"/proc/sys\",\n      \"type\": \"tmpfs\""), "%s",
                 covered);
  ck_assert_msg (strstr (covered, "\"destination\": \"/dev/pts\"")
                     && strstr (covered, "\"destination\": \"/dev/net\"")
                     && strstr (covered, "\"destination\": \"/dev/shm\""),
                 "%s", covered);
}
END_TEST

/* seccomp_enosys_by_kernel (gvisor): the one ENOSYS rule, clone3's, becomes
   an allow, and nothing else in the document changes.  */
START_TEST (test_render_enosys_by_kernel_allows_only_clone3)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *plain = NULL;
  cleanup_free char *gvisor = NULL;
  size_t plain_len, gvisor_len;
  static const char errno_rule[] = "\"clone3\"\n          ],\n          \"action\": \"SCMP_ACT_ERRNO\",\n"
                                   "          \"errnoRet\": 38\n";
  static const char allow_rule[] = "\"clone3\"\n          ],\n          \"action\": \"SCMP_ACT_ALLOW\"\n";

  ck_assert_int_eq (sp_bundle_render_config (&spec, &plain, &plain_len, &err), 0);
  ck_assert_msg (strstr (plain, errno_rule) != NULL, "%s", plain);
  spec.rules.seccomp_enosys_by_kernel = true;
  ck_assert_int_eq (sp_bundle_render_config (&spec, &gvisor, &gvisor_len, &err), 0);
  ck_assert_msg (strstr (gvisor, allow_rule) != NULL, "%s", gvisor);
  ck_assert_ptr_null (strstr (gvisor, "\"errnoRet\": 38"));
  /* The rest is byte for byte the same: only the action line and the
     errnoRet line differ.  */
  ck_assert_uint_eq (plain_len - gvisor_len, strlen (errno_rule) - strlen (allow_rule));
}
END_TEST

/* The sandbox's user namespace maps exactly its root and the probe, each
   onto the host id the spec names, uid and gid alike.  */
START_TEST (test_render_maps_root_and_probe_onto_their_host_ids)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bundle_spec spec = good_spec ();
  cleanup_free char *json = NULL;
  char want[512];
  size_t len;

  spec.host_root_id = 2000000100;
  spec.host_probe_id = 2000000101;
  ck_assert_int_eq (sp_bundle_render_config (&spec, &json, &len, &err), 0);
  ck_assert_ptr_nonnull (strstr (json, "{\n        \"type\": \"user\"\n      }"));
  for (int i = 0; i < 2; i++)
    {
      snprintf (want, sizeof (want),
                "\"%s\": [\n      {\n        \"containerID\": 0,\n        \"hostID\": 2000000100,\n"
                "        \"size\": 1\n      },\n      {\n        \"containerID\": 65534,\n"
                "        \"hostID\": 2000000101,\n        \"size\": 1\n      }\n    ]",
                i == 0 ? "uidMappings" : "gidMappings");
      ck_assert_msg (strstr (json, want) != NULL, "no %s in:\n%s", want, json);
    }
}
END_TEST

START_TEST (test_slot_ids_are_pairs_of_the_range)
{
  uint32_t root, probe;

  sp_bundle_slot_ids (2000000000, 0, &root, &probe);
  ck_assert_uint_eq (root, 2000000000);
  ck_assert_uint_eq (probe, 2000000001);
  sp_bundle_slot_ids (2000000000, 3, &root, &probe);
  ck_assert_uint_eq (root, 2000000006);
  ck_assert_uint_eq (probe, 2000000007);
}
END_TEST

START_TEST (test_id_range_check)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (sp_bundle_id_range_check (SP_PROBE_ID_BASE_DEFAULT, &err), 0);
  ck_assert_int_eq (sp_bundle_id_range_check (65536, &err), 0);
  ck_assert_int_lt (sp_bundle_id_range_check (65534, &err), 0);
  sp_error_release (&err);
  ck_assert_int_lt (sp_bundle_id_range_check (1000, &err), 0);
  sp_error_release (&err);
  ck_assert_int_lt (sp_bundle_id_range_check (0x7fffffffU - SP_PROBE_ID_RANGE + 1, &err), 0);
  sp_error_release (&err);
  ck_assert_int_lt (sp_bundle_id_range_check (0xffffffffU, &err), 0);
}
END_TEST

START_TEST (test_render_refuses_bad_specs)
{
  struct sp_bundle_spec spec;
  char *msg;

#define REFUSED(field, value, needle)                                                                        \
  spec = good_spec ();                                                                                       \
  spec.field = value;                                                                                        \
  msg = render_fails (&spec);                                                                                \
  ck_assert_msg (strstr (msg, needle) != NULL, "%s: %s", #field, msg);                                       \
  free (msg)

  REFUSED (bundle_dir, "relative/dir", "bundle directory");
  REFUSED (bundle_dir, NULL, "bundle directory");
  REFUSED (rootfs_root, "rootfs", "rootfs");
  REFUSED (rootfs_digest, "md5:00", "rootfs digest");
  REFUSED (seccomp, NULL, "seccomp");
  REFUSED (memory_limit_bytes, 1, "memory limit");
  REFUSED (memory_limit_bytes, 64ULL << 40, "memory limit");
  REFUSED (run_id, "Run", "run id");
  REFUSED (invocation_id, "", "invocation id");
  REFUSED (host_root_id, 0, "host ids");
  REFUSED (host_probe_id, 65534, "host ids");
  REFUSED (host_probe_id, SP_PROBE_ID_BASE_DEFAULT, "host ids");
  REFUSED (host_root_id, 0x80000000U, "host ids");
#undef REFUSED
}
END_TEST

/* Removes what sp_bundle_write made in dir (dirfd), then dir itself.  */
static void
remove_bundle (int dirfd, const char *dir)
{
  unlinkat (dirfd, "config.json", 0);
  unlinkat (dirfd, "probe.py", 0);
  unlinkat (dirfd, "out", 0);
  unlinkat (dirfd, "repo", AT_REMOVEDIR);
  ck_assert_int_eq (rmdir (dir), 0);
}

START_TEST (test_write_creates_the_four_entries)
{
  cleanup_error sp_error_t err = NULL;
  char dir[] = "/tmp/sp-bundle-XXXXXX";
  struct sp_bundle_spec spec;
  cleanup_close int dirfd = -1;
  struct stat st;
  char buf[16];
  int fd;

  if (geteuid () != 0)
    {
      /* Giving repo/ and out to the probe's host id needs root: the write must fail
         cleanly rather than produce a bundle the probe cannot use.  */
      ck_assert_ptr_nonnull (mkdtemp (dir));
      dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      spec = good_spec ();
      spec.bundle_dir = dir;
      ck_assert_int_lt (sp_bundle_write (dirfd, &spec, "x", 1, &err), 0);
      ck_assert_ptr_nonnull (strstr (sp_error_message (err), "give to"));
      unlinkat (dirfd, "repo", AT_REMOVEDIR);
      rmdir (dir);
      return;
    }
  ck_assert_ptr_nonnull (mkdtemp (dir));
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  spec = good_spec ();
  spec.bundle_dir = dir;
  if (sp_bundle_write (dirfd, &spec, "print(1)\n", 9, &err) < 0)
    ck_abort_msg ("sp_bundle_write: %s", sp_error_message (err));

  ck_assert_int_eq (fstatat (dirfd, "repo", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISDIR (st.st_mode) && (st.st_mode & 07777) == 0700 && st.st_uid == spec.host_probe_id
             && st.st_gid == spec.host_probe_id);
  ck_assert_int_eq (fstatat (dirfd, "out", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0600 && st.st_uid == spec.host_probe_id
             && st.st_size == 0);
  ck_assert_int_eq (fstatat (dirfd, "probe.py", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0444 && st.st_uid == 0 && st.st_size == 9);
  fd = openat (dirfd, "probe.py", O_RDONLY | O_CLOEXEC);
  ck_assert_int_eq (read (fd, buf, sizeof (buf)), 9);
  close (fd);
  ck_assert_mem_eq (buf, "print(1)\n", 9);
  ck_assert_int_eq (fstatat (dirfd, "config.json", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0444 && st.st_uid == 0);

  /* A second write into the same directory refuses rather than overwrite.  */
  sp_error_release (&err);
  ck_assert_int_lt (sp_bundle_write (dirfd, &spec, "x", 1, &err), 0);

  remove_bundle (dirfd, dir);
}
END_TEST

START_TEST (test_script_goes_in_once_through_its_descriptor)
{
  cleanup_error sp_error_t err = NULL;
  char dir[] = "/tmp/sp-bundle-XXXXXX";
  char path[64];
  struct sp_bundle_spec spec;
  cleanup_close int dirfd = -1;
  cleanup_close int script_fd = -1;
  int fd = -1;
  char buf[16];

  ck_assert_ptr_nonnull (mkdtemp (dir));
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  spec = good_spec ();
  spec.bundle_dir = dir;
  if (geteuid () != 0)
    {
      /* As in test_write_creates_the_four_entries: no bundle without root.  */
      ck_assert_int_lt (sp_bundle_write (dirfd, &spec, NULL, 0, &err), 0);
      unlinkat (dirfd, "repo", AT_REMOVEDIR);
      rmdir (dir);
      return;
    }
  if (sp_bundle_write (dirfd, &spec, NULL, 0, &err) < 0)
    ck_abort_msg ("sp_bundle_write: %s", sp_error_message (err));
  if (sp_bundle_open_script (dirfd, &script_fd, &err) < 0)
    ck_abort_msg ("sp_bundle_open_script: %s", sp_error_message (err));

  /* Docker's seal: the path bound read-only over itself after the open (in
     this test process's own mount namespace).  The path no longer opens for
     writing; the descriptor still writes the same inode.  */
  snprintf (path, sizeof (path), "%s/probe.py", dir);
  ck_assert_int_eq (unshare (CLONE_NEWNS), 0);
  ck_assert_int_eq (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
  ck_assert_int_eq (mount (path, path, NULL, MS_BIND, NULL), 0);
  ck_assert_int_eq (mount (NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL), 0);
  /* The directory again, from this namespace, where the bind is.  */
  close (dirfd);
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (dirfd, 0);
  ck_assert_int_lt (openat (dirfd, "probe.py", O_WRONLY | O_CLOEXEC), 0);
  ck_assert_int_eq (errno, EROFS);
  if (sp_bundle_put_script (script_fd, "print(2)\n", 9, &err) < 0)
    ck_abort_msg ("sp_bundle_put_script: %s", sp_error_message (err));
  fd = openat (dirfd, "probe.py", O_RDONLY | O_CLOEXEC);
  ck_assert_int_eq (read (fd, buf, sizeof (buf)), 9);
  close (fd);
  ck_assert_mem_eq (buf, "print(2)\n", 9);

  /* Once: the file is no longer the empty placeholder, by the descriptor or
     by the path.  */
  ck_assert_int_lt (sp_bundle_put_script (script_fd, "x", 1, &err), 0);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "no longer the empty placeholder"));
  sp_error_release (&err);
  ck_assert_int_eq (umount (path), 0);
  fd = -1;
  ck_assert_int_lt (sp_bundle_open_script (dirfd, &fd, &err), 0);
  ck_assert_int_eq (fd, -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "not the empty placeholder"));

  remove_bundle (dirfd, dir);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("bundle");
  TCase *tc = tcase_create ("core");

  tcase_add_unchecked_fixture (tc, load_profile, free_profile);
  tcase_add_loop_test (tc, test_id_check, 0, sizeof (ids) / sizeof (ids[0]));
  tcase_add_test (tc, test_container_id);
  tcase_add_test (tc, test_render_maps_root_and_probe_onto_their_host_ids);
  tcase_add_test (tc, test_slot_ids_are_pairs_of_the_range);
  tcase_add_test (tc, test_id_range_check);
  tcase_add_test (tc, test_render_is_deterministic);
  tcase_add_test (tc, test_render_masks_host_wide_state);
  tcase_add_test (tc, test_render_tmp_on_host_binds_the_bundles_tmp);
  tcase_add_test (tc, test_render_repo_exclusive_hints_the_repository_alone);
  tcase_add_test (tc, test_render_enosys_by_kernel_allows_only_clone3);
  tcase_add_test (tc, test_render_refuses_bad_specs);
  tcase_add_test (tc, test_write_creates_the_four_entries);
  tcase_add_test (tc, test_script_goes_in_once_through_its_descriptor);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
