/* The seccomp profile (seccomp/profile.h): the built-in profile's shape, one
   named test per rule of the loader, and the canonical re-emission.  The
   shape is read back from sp_seccomp_profile_gen, so it is asserted on what
   a bundle's config.json would carry.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <seccomp.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "seccomp/profile.h"
#include "text/json.h"
#include "text/yajl_util.h"

#include "denied.h"
#include "seccomp/profile_internal.h"
#include "sp_check.h"

/* ---- helpers ---- */

static struct sp_seccomp_profile *
load_ok (const char *doc, size_t len)
{
  sp_error_t err = NULL;
  struct sp_seccomp_profile *p = NULL;
  int ret = sp_seccomp_profile_load (doc, len, &p, &err);

  ck_assert_msg (ret == 0, "rejected: %s", sp_error_message (err));
  ck_assert_ptr_nonnull (p);
  return p;
}

static struct sp_seccomp_profile *
builtin (void)
{
  sp_error_t err = NULL;
  struct sp_seccomp_profile *p = NULL;

  ck_assert_msg (sp_seccomp_profile_load_builtin (&p, &err) == 0, "built-in profile: %s",
                 sp_error_message (err));
  ck_assert_ptr_nonnull (p);
  return p;
}

static void
expect_reject (const char *doc, size_t len, const char *fragment)
{
  SP_CHECK_PARSE_REFUSED (sp_seccomp_profile_load, struct sp_seccomp_profile, doc, len, fragment, NULL);
}

/* The profile as sp_seccomp_profile_gen writes it; wrap puts it where a
   bundle does, as the value of a member.  */
static char *
gen_text (const struct sp_seccomp_profile *p, bool wrap)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t len;
  char *copy;

  ck_assert_ptr_nonnull (g);
  if (wrap)
    {
      ck_assert_int_eq (yajl_gen_map_open (g), yajl_gen_status_ok);
      ck_assert_int_eq (yajl_gen_string (g, (const unsigned char *)"seccomp", 7), yajl_gen_status_ok);
    }
  ck_assert_int_eq (sp_seccomp_profile_gen (p, g), 0);
  if (wrap)
    ck_assert_int_eq (yajl_gen_map_close (g), yajl_gen_status_ok);
  ck_assert_int_eq (yajl_gen_get_buf (g, &buf, &len), yajl_gen_status_ok);
  copy = strndup ((const char *)buf, len);
  ck_assert_ptr_nonnull (copy);
  return copy;
}

static struct sp_json *
parse_tree (const char *text)
{
  sp_error_t err = NULL;
  struct sp_json *tree = NULL;

  ck_assert_msg (sp_json_parse (text, strlen (text), 16, &tree, &err) == 0, "gen output does not parse: %s",
                 sp_error_message (err));
  return tree;
}

/* The built-in profile as a config.json would carry it.  */
static struct sp_json *
builtin_tree (void)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_free char *text = gen_text (p, false);

  return parse_tree (text);
}

static const struct sp_json *
member (const struct sp_json *obj, const char *key)
{
  const struct sp_json *v = sp_json_object_get (obj, key);
  ck_assert_msg (v != NULL, "no member \"%s\"", key);
  return v;
}

static bool
is_string (const struct sp_json *v, const char *s)
{
  return v != NULL && v->type == SP_JSON_STRING && strcmp (v->u.string.data, s) == 0;
}

static int64_t
integer (const struct sp_json *v)
{
  int64_t n;
  ck_assert_msg (sp_json_integer (v, INT64_MIN, INT64_MAX, &n) == 0, "not an integer");
  return n;
}

static const struct sp_json *
rules_of (const struct sp_json *tree)
{
  const struct sp_json *rules = member (tree, "syscalls");
  ck_assert_int_eq (rules->type, SP_JSON_ARRAY);
  return rules;
}

static bool
rule_names (const struct sp_json *rule, const char *name)
{
  const struct sp_json *names = member (rule, "names");

  for (size_t i = 0; i < names->u.array.len; i++)
    if (is_string (names->u.array.items[i], name))
      return true;
  return false;
}

/* How many rules name `name`; each must allow it with exactly one condition
   `op` on argument `index`, and *values collects the compared values.  */
static size_t
single_condition_rules (const struct sp_json *tree, const char *name, unsigned index, const char *op,
                        int64_t *values, size_t cap)
{
  const struct sp_json *rules = rules_of (tree);
  size_t n = 0;

  for (size_t i = 0; i < rules->u.array.len; i++)
    {
      const struct sp_json *r = rules->u.array.items[i], *args, *a;

      if (!rule_names (r, name))
        continue;
      ck_assert_msg (is_string (member (r, "action"), "SCMP_ACT_ALLOW"), "syscalls[%zu] does not allow %s", i,
                     name);
      args = sp_json_object_get (r, "args");
      ck_assert_msg (args != NULL && args->u.array.len == 1,
                     "syscalls[%zu] (%s) must have exactly one condition", i, name);
      a = args->u.array.items[0];
      ck_assert_int_eq (integer (member (a, "index")), index);
      ck_assert_msg (is_string (member (a, "op"), op), "syscalls[%zu] (%s) must use %s", i, name, op);
      ck_assert (n < cap);
      values[n++] = integer (member (a, "value"));
    }
  return n;
}

static bool
contains (const int64_t *values, size_t n, int64_t v)
{
  for (size_t i = 0; i < n; i++)
    if (values[i] == v)
      return true;
  return false;
}

/* ---- the built-in profile ---- */

START_TEST (builtin_profile_loads_and_compiles)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_seccomp_ctx scmp_filter_ctx ctx = NULL;
  sp_error_t err = NULL;

  ck_assert_uint_gt (p->n_rules, 0);
  ck_assert_msg (sp_seccomp_profile_compile (p, &ctx, &err) == 0, "%s", sp_error_message (err));
  ck_assert_ptr_nonnull (ctx);
}
END_TEST

START_TEST (builtin_profile_is_the_bytes_of_seccomp_probe_json)
{
  const char *path = getenv ("SP_SECCOMP_SOURCE");
  cleanup_free char *buf = NULL;
  size_t len = 0;
  sp_error_t err = NULL;

  ck_assert_msg (path != NULL, "SP_SECCOMP_SOURCE is not set");
  ck_assert_msg (sp_read_path_capped (path, SP_SECCOMP_MAX_BYTES + 1, &buf, &len, &err) == 0, "%s",
                 sp_error_message (err));
  ck_assert_uint_eq (len, sp_seccomp_builtin_json_len);
  ck_assert (memcmp (buf, sp_seccomp_builtin_json, len) == 0);
}
END_TEST

START_TEST (default_action_denies_with_eperm)
{
  cleanup_json struct sp_json *tree = builtin_tree ();

  /* SCMP_ACT_ERRNO without defaultErrnoRet (OCI 1.1) is EPERM in 1.0.x.  */
  ck_assert (is_string (member (tree, "defaultAction"), "SCMP_ACT_ERRNO"));
  ck_assert_ptr_null (sp_json_object_get (tree, "defaultErrnoRet"));
}
END_TEST

START_TEST (architectures_are_x86_64_only)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *arches = member (tree, "architectures");

  ck_assert_int_eq (arches->type, SP_JSON_ARRAY);
  ck_assert_uint_eq (arches->u.array.len, 1);
  ck_assert (is_string (arches->u.array.items[0], "SCMP_ARCH_X86_64"));
}
END_TEST

START_TEST (top_level_has_only_oci_1_0_members)
{
  cleanup_json struct sp_json *tree = builtin_tree ();

  ck_assert_uint_eq (tree->u.object.len, 3);
  ck_assert_str_eq (tree->u.object.members[0].key, "defaultAction");
  ck_assert_str_eq (tree->u.object.members[1].key, "architectures");
  ck_assert_str_eq (tree->u.object.members[2].key, "syscalls");
}
END_TEST

START_TEST (clone3_is_errno_enosys)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *rules = rules_of (tree);
  size_t seen = 0;

  for (size_t i = 0; i < rules->u.array.len; i++)
    {
      const struct sp_json *r = rules->u.array.items[i];
      if (!rule_names (r, "clone3"))
        continue;
      seen++;
      ck_assert (is_string (member (r, "action"), "SCMP_ACT_ERRNO"));
      ck_assert_int_eq (integer (member (r, "errnoRet")), ENOSYS);
      ck_assert_ptr_null (sp_json_object_get (r, "args"));
    }
  ck_assert_uint_eq (seen, 1);
}
END_TEST

START_TEST (socket_is_af_unix_only)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = single_condition_rules (tree, "socket", 0, "SCMP_CMP_EQ", v, 4);

  ck_assert_uint_eq (n, 1);
  ck_assert_int_eq (v[0], AF_UNIX);
}
END_TEST

START_TEST (socketpair_is_af_unix_only)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = single_condition_rules (tree, "socketpair", 0, "SCMP_CMP_EQ", v, 4);

  ck_assert_uint_eq (n, 1);
  ck_assert_int_eq (v[0], AF_UNIX);
}
END_TEST

START_TEST (clone_carries_the_namespace_mask)
{
  const int64_t mask = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
                       | CLONE_NEWCGROUP;
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *rules = rules_of (tree);
  int64_t v[4];
  size_t n = single_condition_rules (tree, "clone", 0, "SCMP_CMP_MASKED_EQ", v, 4);

  ck_assert_uint_eq (n, 1);
  ck_assert_int_eq (v[0], mask);
  for (size_t i = 0; i < rules->u.array.len; i++)
    if (rule_names (rules->u.array.items[i], "clone"))
      {
        const struct sp_json *a = member (rules->u.array.items[i], "args")->u.array.items[0];
        ck_assert_int_eq (integer (member (a, "valueTwo")), 0);
      }
}
END_TEST

START_TEST (personality_is_per_linux_or_query_only)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = single_condition_rules (tree, "personality", 0, "SCMP_CMP_EQ", v, 4);

  ck_assert_uint_eq (n, 2);
  ck_assert (contains (v, n, 0));          /* PER_LINUX */
  ck_assert (contains (v, n, 0xffffffff)); /* query */
}
END_TEST

START_TEST (ioctl_is_limited_to_six_requests)
{
  const int64_t allowed[] = { TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX };
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[16];
  size_t n = single_condition_rules (tree, "ioctl", 1, "SCMP_CMP_EQ", v, 16);

  ck_assert_uint_eq (n, 6);
  for (size_t i = 0; i < 6; i++)
    ck_assert_msg (contains (v, n, allowed[i]), "ioctl request 0x%llx is missing",
                   (unsigned long long)allowed[i]);
}
END_TEST

/* The one rule that only names calls: EPERM, as the default, no args.  */
static bool
is_naming_rule (const struct sp_json *r)
{
  const struct sp_json *e = sp_json_object_get (r, "errnoRet");

  return is_string (member (r, "action"), "SCMP_ACT_ERRNO") && e != NULL && integer (e) == EPERM
         && sp_json_object_get (r, "args") == NULL;
}

START_TEST (every_rule_allows_except_clone3_and_the_eperm_names)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *rules = rules_of (tree);
  size_t naming = 0;

  for (size_t i = 0; i < rules->u.array.len; i++)
    {
      const struct sp_json *r = rules->u.array.items[i];
      if (rule_names (r, "clone3"))
        continue;
      if (is_naming_rule (r))
        {
          naming++;
          continue;
        }
      ck_assert_msg (is_string (member (r, "action"), "SCMP_ACT_ALLOW"), "syscalls[%zu] is not an allow rule",
                     i);
    }
  ck_assert_uint_eq (naming, 1);
}
END_TEST

/* runc answers ENOSYS above the highest number a profile names, so the
   profile names 442 (mount_setattr) to 450 (set_mempolicy_home_node) with
   EPERM, and that is its highest number: runc's stub starts at 451.  */
START_TEST (calls_442_to_450_are_named_with_eperm_and_nothing_higher)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *rules = rules_of (tree);
  bool named[451 - 442] = { false };
  int highest = -1;

  for (size_t i = 0; i < rules->u.array.len; i++)
    {
      const struct sp_json *r = rules->u.array.items[i], *names = member (r, "names");

      for (size_t j = 0; j < names->u.array.len; j++)
        {
          int nr = seccomp_syscall_resolve_name (names->u.array.items[j]->u.string.data);

          ck_assert_int_ge (nr, 0);
          if (nr > highest)
            highest = nr;
          if (nr >= 442)
            {
              ck_assert_msg (is_naming_rule (r), "syscalls[%zu] names %d but is not the EPERM rule", i, nr);
              named[nr - 442] = true;
            }
        }
    }
  ck_assert_int_eq (highest, 450);
  for (int nr = 442; nr <= 450; nr++)
    ck_assert_msg (named[nr - 442], "system call %d is not named", nr);
}
END_TEST

/* How many rules name `name`; each must allow it when `prot & mask == 0` on
   argument `index`, one mask per rule, and *masks collects them.  */
static size_t
masked_zero_rules (const struct sp_json *tree, const char *name, unsigned index, int64_t *masks, size_t cap)
{
  const struct sp_json *rules = rules_of (tree);
  size_t n = single_condition_rules (tree, name, index, "SCMP_CMP_MASKED_EQ", masks, cap);

  for (size_t i = 0; i < rules->u.array.len; i++)
    if (rule_names (rules->u.array.items[i], name))
      {
        const struct sp_json *a = member (rules->u.array.items[i], "args")->u.array.items[0];
        ck_assert_int_eq (integer (member (a, "valueTwo")), 0);
      }
  return n;
}

START_TEST (mmap_is_never_writable_and_executable)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = masked_zero_rules (tree, "mmap", 2, v, 4);

  ck_assert_uint_eq (n, 2);
  ck_assert (contains (v, n, PROT_EXEC));
  ck_assert (contains (v, n, PROT_WRITE));
}
END_TEST

START_TEST (mprotect_never_makes_memory_executable)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = masked_zero_rules (tree, "mprotect", 2, v, 4);

  ck_assert_uint_eq (n, 1);
  ck_assert_int_eq (v[0], PROT_EXEC);
}
END_TEST

START_TEST (renameat2_never_makes_a_whiteout)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  int64_t v[4];
  size_t n = masked_zero_rules (tree, "renameat2", 4, v, 4);

  ck_assert_uint_eq (n, 1);
  ck_assert_int_eq (v[0], RENAME_WHITEOUT);
}
END_TEST

/* One test per denied name: it is a system call on this architecture (so a
   typo here cannot pass) and no rule of the profile names it, except the
   rule that names calls only to keep them EPERM under runc.  */
static void
expect_never_allowed (const char *name)
{
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *rules = rules_of (tree);

  ck_assert_msg (seccomp_syscall_resolve_name (name) >= 0, "%s is not a system call here", name);
  for (size_t i = 0; i < rules->u.array.len; i++)
    ck_assert_msg (!rule_names (rules->u.array.items[i], name) || is_naming_rule (rules->u.array.items[i]),
                   "syscalls[%zu] names %s", i, name);
}

#define DEFINE_DENIED(name)                                                                                  \
  START_TEST (denied_##name##_is_never_allowed)                                                              \
  {                                                                                                          \
    expect_never_allowed (#name);                                                                            \
  }                                                                                                          \
  END_TEST
DENIED_SYSCALLS (DEFINE_DENIED)

/* ---- the loader: documents ---- */

#define PROFILE(arches, rules)                                                                               \
  "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" arches ",\"syscalls\":[" rules "]}"
#define NATIVE        "[\"SCMP_ARCH_X86_64\"]"
#define RULES(rules)  PROFILE (NATIVE, rules)
#define READ_RULE     "{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}"
#define ARG(a)        RULES ("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[" a "]}")
#define EQ1(index)    "{\"index\":" #index ",\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"
#define IOCTL(values) "{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[" values "]}"
#define WITH_DEFAULT(action, rules)                                                                          \
  "{\"defaultAction\":\"" action "\",\"architectures\":" NATIVE ",\"syscalls\":[" rules "]}"

#define BAD_U64   "must be an integer from 0 to 18446744073709551615"
#define BAD_INDEX "syscalls[0].args[0].index: must be an integer from 0 to 5"
#define BAD_ERRNO "syscalls[0].errnoRet: must be an integer from 1 to 4095"

/* name, document, fragment */
#define REJECT_ROWS(X)                                                                                       \
  X (unknown_syscall_name_is_rejected_and_named,                                                             \
     RULES ("{\"names\":[\"read\",\"no_such_call\"],"                                                        \
            "\"action\":\"SCMP_ACT_ALLOW\"}"),                                                               \
     "syscalls[0].names[1]: unknown system call \"no_such_call\" on SCMP_ARCH_X86_64")                       \
  X (unknown_name_in_a_later_rule_is_named,                                                                  \
     RULES (READ_RULE ",{\"names\":[\"opne\"],\"action\":\"SCMP_ACT_ALLOW\"}"),                              \
     "syscalls[1].names[0]: unknown system call \"opne\"")                                                   \
  X (pseudo_syscall_of_another_arch_is_rejected,                                                             \
     RULES ("{\"names\":[\"socketcall\"],\"action\":\"SCMP_ACT_ALLOW\"}"),                                   \
     "syscalls[0].names[0]: unknown system call \"socketcall\" on SCMP_ARCH_X86_64")                         \
  X (syscall_name_case_variant_is_rejected, RULES ("{\"names\":[\"READ\"],\"action\":\"SCMP_ACT_ALLOW\"}"),  \
     "unknown system call \"READ\"")                                                                         \
  X (empty_syscall_name_is_rejected, RULES ("{\"names\":[\"\"],\"action\":\"SCMP_ACT_ALLOW\"}"),             \
     "syscalls[0].names[0]: unknown system call \"\"")                                                       \
  X (unknown_action_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOWED\"}"),           \
     "syscalls[0].action: unknown action \"SCMP_ACT_ALLOWED\"")                                              \
  X (trace_action_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_TRACE\"}"),               \
     "syscalls[0].action: unknown action \"SCMP_ACT_TRACE\"")                                                \
  X (log_action_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_LOG\"}"),                   \
     "syscalls[0].action: unknown action \"SCMP_ACT_LOG\"")                                                  \
  X (notify_action_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_NOTIFY\"}"),             \
     "syscalls[0].action: unknown action \"SCMP_ACT_NOTIFY\"")                                               \
  X (action_number_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":2147418112}"),                      \
     "syscalls[0].action: must be one of \"SCMP_ACT_ALLOW\"")                                                \
  X (missing_action_is_rejected, RULES ("{\"names\":[\"read\"]}"), "syscalls[0].action: required")           \
  X (unknown_default_action_is_rejected, WITH_DEFAULT ("SCMP_ACT_DENY", READ_RULE),                          \
     "defaultAction: unknown action \"SCMP_ACT_DENY\"")                                                      \
  X (allow_as_default_action_is_rejected, WITH_DEFAULT ("SCMP_ACT_ALLOW", READ_RULE),                        \
     "defaultAction: must deny (the profile is an allowlist)")                                               \
  X (missing_default_action_is_rejected, "{\"architectures\":" NATIVE ",\"syscalls\":[" READ_RULE "]}",      \
     "defaultAction: required")                                                                              \
  X (null_default_action_is_rejected,                                                                        \
     "{\"defaultAction\":null,\"architectures\":" NATIVE ",\"syscalls\":[" READ_RULE "]}",                   \
     "defaultAction: must be one of")                                                                        \
  X (unknown_op_is_rejected, ARG ("{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_IN\"}"),                       \
     "syscalls[0].args[0].op: unknown operator \"SCMP_CMP_IN\"")                                             \
  X (lowercase_op_is_rejected, ARG ("{\"index\":1,\"value\":1,\"op\":\"scmp_cmp_eq\"}"),                     \
     "syscalls[0].args[0].op: unknown operator \"scmp_cmp_eq\"")                                             \
  X (op_number_is_rejected, ARG ("{\"index\":1,\"value\":1,\"op\":4}"),                                      \
     "syscalls[0].args[0].op: must be one of \"SCMP_CMP_NE\"")                                               \
  X (missing_op_is_rejected, ARG ("{\"index\":1,\"value\":1}"), "syscalls[0].args[0].op: required")          \
  X (oci_1_1_default_errno_ret_is_rejected,                                                                  \
     "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":1,\"architectures\":" NATIVE                 \
     ",\"syscalls\":[" READ_RULE "]}",                                                                       \
     "(document): unknown key \"defaultErrnoRet\"")                                                          \
  X (flags_key_is_rejected,                                                                                  \
     "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" NATIVE ",\"syscalls\":[" READ_RULE           \
     "],\"flags\":[]}",                                                                                      \
     "(document): unknown key \"flags\"")                                                                    \
  X (unknown_key_in_a_rule_is_rejected,                                                                      \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"comment\":\"why\"}"),                     \
     "syscalls[0]: unknown key \"comment\"")                                                                 \
  X (case_variant_key_in_a_rule_is_rejected, RULES ("{\"Names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}"), \
     "syscalls[0]: unknown key \"Names\"")                                                                   \
  X (unknown_key_in_an_arg_is_rejected,                                                                      \
     ARG ("{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_EQ\",\"valueThree\":0}"),                              \
     "syscalls[0].args[0]: unknown key \"valueThree\"")                                                      \
  X (missing_architectures_is_rejected,                                                                      \
     "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[" READ_RULE "]}", "architectures: required")       \
  X (architectures_without_the_native_one_are_rejected, PROFILE ("[\"SCMP_ARCH_AARCH64\"]", READ_RULE),      \
     "architectures: must include the native architecture SCMP_ARCH_X86_64")                                 \
  X (x86_without_x86_64_is_rejected, PROFILE ("[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"]", READ_RULE),           \
     "architectures: must include the native architecture SCMP_ARCH_X86_64")                                 \
  X (empty_architectures_are_rejected, PROFILE ("[]", READ_RULE),                                            \
     "architectures: must be a non-empty array of \"SCMP_ARCH_*\" names")                                    \
  X (architectures_string_is_rejected, PROFILE ("\"SCMP_ARCH_X86_64\"", READ_RULE),                          \
     "architectures: must be a non-empty array")                                                             \
  X (unknown_architecture_is_rejected, PROFILE ("[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_Z80\"]", READ_RULE),      \
     "architectures[1]: unknown architecture \"SCMP_ARCH_Z80\"")                                             \
  X (libseccomp_style_architecture_is_rejected, PROFILE ("[\"x86_64\"]", READ_RULE),                         \
     "architectures[0]: unknown architecture \"x86_64\"")                                                    \
  X (architecture_number_is_rejected, PROFILE ("[3221225534]", READ_RULE),                                   \
     "architectures[0]: must be a string")                                                                   \
  X (duplicate_architecture_is_rejected, PROFILE ("[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X86_64\"]", READ_RULE), \
     "architectures[1]: duplicate of architectures[0]")                                                      \
  X (duplicate_name_across_rules_is_rejected, RULES (READ_RULE "," READ_RULE),                               \
     "syscalls[1].names[0]: \"read\" is already in syscalls[0]")                                             \
  X (duplicate_name_within_a_rule_is_rejected,                                                               \
     RULES ("{\"names\":[\"read\",\"write\",\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}"),                      \
     "syscalls[0].names[2]: repeats syscalls[0].names[0]")                                                   \
  X (first_duplicate_in_document_order_is_named,                                                             \
     RULES ("{\"names\":[\"write\",\"read\"],\"action\":\"SCMP_ACT_ALLOW\"},"                                \
            "{\"names\":[\"close\",\"read\",\"write\"],\"action\":\"SCMP_ACT_ALLOW\"}"),                     \
     "syscalls[1].names[1]: \"read\" is already in syscalls[0]")                                             \
  X (duplicate_unconditional_then_conditional_is_rejected,                                                   \
     RULES (READ_RULE ",{\"names\":[\"read\"],"                                                              \
                      "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[" EQ1 (0) "]}"),                              \
     "syscalls[1].names[0]: \"read\" is already in syscalls[0]; a system call may be in several rules only") \
  X (duplicate_with_another_action_is_rejected,                                                              \
     RULES (IOCTL (EQ1 (1)) ",{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":22,"         \
                            "\"args\":[" EQ1 (2) "]}"),                                                      \
     "syscalls[1].names[0]: \"ioctl\" is already in syscalls[0]")                                            \
  X (duplicate_with_another_errno_is_rejected,                                                               \
     RULES ("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":22,\"args\":[" EQ1 (          \
         1) "]},"                                                                                            \
            "{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":25,\"args\":[" EQ1 (2) "]}"), \
     "syscalls[1].names[0]: \"ioctl\" is already in syscalls[0]")                                            \
  X (missing_syscalls_is_rejected, "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" NATIVE "}",    \
     "syscalls: required")                                                                                   \
  X (empty_syscalls_is_rejected, RULES (""), "syscalls: must be a non-empty array of rules")                 \
  X (syscalls_object_is_rejected,                                                                            \
     "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" NATIVE ",\"syscalls\":{}}",                  \
     "syscalls: must be a non-empty array of rules")                                                         \
  X (rule_string_is_rejected, RULES ("\"read\""), "syscalls[0]: must be an object")                          \
  X (rule_null_is_rejected, RULES (READ_RULE ",null"), "syscalls[1]: must be an object")                     \
  X (missing_names_is_rejected, RULES ("{\"action\":\"SCMP_ACT_ALLOW\"}"), "syscalls[0].names: required")    \
  X (empty_names_are_rejected, RULES ("{\"names\":[],\"action\":\"SCMP_ACT_ALLOW\"}"),                       \
     "syscalls[0].names: must be a non-empty array of system call names")                                    \
  X (names_string_is_rejected, RULES ("{\"names\":\"read\",\"action\":\"SCMP_ACT_ALLOW\"}"),                 \
     "syscalls[0].names: must be a non-empty array")                                                         \
  X (name_number_is_rejected, RULES ("{\"names\":[0],\"action\":\"SCMP_ACT_ALLOW\"}"),                       \
     "syscalls[0].names[0]: must be a string")                                                               \
  X (errno_ret_with_allow_is_rejected,                                                                       \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\","                                           \
            "\"errnoRet\":1}"),                                                                              \
     "syscalls[0].errnoRet: only with SCMP_ACT_ERRNO")                                                       \
  X (errno_ret_zero_is_rejected,                                                                             \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":0}"), BAD_ERRNO)               \
  X (errno_ret_above_max_errno_is_rejected,                                                                  \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":4096}"), BAD_ERRNO)            \
  X (errno_ret_negative_is_rejected,                                                                         \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":-38}"), BAD_ERRNO)             \
  X (errno_ret_string_is_rejected,                                                                           \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":\"38\"}"), BAD_ERRNO)          \
  X (errno_ret_fraction_is_rejected,                                                                         \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38.0}"), BAD_ERRNO)            \
  X (rule_like_the_default_is_rejected, RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\"}"),      \
     "syscalls[0]: does what defaultAction does, so it has no effect (a rule that only names calls for "     \
     "runc's "                                                                                               \
     "ENOSYS stub writes \"errnoRet\": 1 and no args)")                                                      \
  X (rule_with_explicit_eperm_and_args_like_the_default_is_rejected,                                         \
     RULES ("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1,\"args\":[" EQ1 (1) "]}"),  \
     "syscalls[0]: does what defaultAction does")                                                            \
  X (eperm_name_repeated_in_an_allow_rule_is_rejected,                                                       \
     RULES (READ_RULE ",{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1}"),               \
     "syscalls[1].names[0]: \"read\" is already in syscalls[0]")                                             \
  X (kill_rule_under_kill_default_is_rejected,                                                               \
     WITH_DEFAULT ("SCMP_ACT_KILL_PROCESS", "{\"names\":[\"read\"],\"action\":\"SCMP_ACT_KILL_PROCESS\"}"),  \
     "syscalls[0]: does what defaultAction does")                                                            \
  X (empty_args_are_rejected, ARG (""), "syscalls[0].args: must be a non-empty array of conditions")         \
  X (args_object_is_rejected, RULES ("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":{}}"),   \
     "syscalls[0].args: must be a non-empty array")                                                          \
  X (arg_number_is_rejected, ARG ("1"), "syscalls[0].args[0]: must be an object")                            \
  X (arg_index_6_is_rejected, ARG ("{\"index\":6,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"), BAD_INDEX)           \
  X (arg_index_negative_is_rejected, ARG ("{\"index\":-1,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"), BAD_INDEX)   \
  X (arg_index_string_is_rejected, ARG ("{\"index\":\"0\",\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"), BAD_INDEX)  \
  X (arg_index_fraction_is_rejected, ARG ("{\"index\":0.5,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"), BAD_INDEX)  \
  X (missing_arg_index_is_rejected, ARG ("{\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"),                            \
     "syscalls[0].args[0].index: required")                                                                  \
  X (missing_arg_value_is_rejected, ARG ("{\"index\":1,\"op\":\"SCMP_CMP_EQ\"}"),                            \
     "syscalls[0].args[0].value: required")                                                                  \
  X (arg_value_negative_is_rejected, ARG ("{\"index\":1,\"value\":-1,\"op\":\"SCMP_CMP_EQ\"}"),              \
     "syscalls[0].args[0].value: " BAD_U64)                                                                  \
  X (arg_value_above_u64_is_rejected,                                                                        \
     ARG ("{\"index\":1,\"value\":18446744073709551616,\"op\":\"SCMP_CMP_EQ\"}"),                            \
     "syscalls[0].args[0].value: " BAD_U64)                                                                  \
  X (arg_value_with_leading_zero_is_rejected, ARG ("{\"index\":1,\"value\":01,\"op\":\"SCMP_CMP_EQ\"}"),     \
     "syscalls[0].args[0]: invalid JSON")                                                                    \
  X (arg_value_fraction_is_rejected, ARG ("{\"index\":1,\"value\":1.0,\"op\":\"SCMP_CMP_EQ\"}"),             \
     "syscalls[0].args[0].value: " BAD_U64)                                                                  \
  X (arg_value_exponent_is_rejected, ARG ("{\"index\":1,\"value\":1e3,\"op\":\"SCMP_CMP_EQ\"}"),             \
     "syscalls[0].args[0].value: " BAD_U64)                                                                  \
  X (arg_value_string_is_rejected, ARG ("{\"index\":1,\"value\":\"1\",\"op\":\"SCMP_CMP_EQ\"}"),             \
     "syscalls[0].args[0].value: " BAD_U64)                                                                  \
  X (value_two_without_masked_eq_is_rejected,                                                                \
     ARG ("{\"index\":1,\"value\":1,\"valueTwo\":0,\"op\":\"SCMP_CMP_EQ\"}"),                                \
     "syscalls[0].args[0].valueTwo: only with SCMP_CMP_MASKED_EQ")                                           \
  X (value_two_negative_is_rejected,                                                                         \
     ARG ("{\"index\":1,\"value\":1,\"valueTwo\":-1,\"op\":\"SCMP_CMP_MASKED_EQ\"}"),                        \
     "syscalls[0].args[0].valueTwo: " BAD_U64)                                                               \
  X (value_two_outside_the_mask_is_rejected,                                                                 \
     ARG ("{\"index\":1,\"value\":240,\"valueTwo\":1,\"op\":\"SCMP_CMP_MASKED_EQ\"}"),                       \
     "syscalls[0].args[0].valueTwo: has bits outside the mask in value, so it never matches")                \
  X (repeated_arg_index_is_rejected, ARG (EQ1 (1) "," EQ1 (1)),                                              \
     "syscalls[0].args[1].index: repeats the index of syscalls[0].args[0]")                                  \
  X (seven_conditions_are_rejected,                                                                          \
     ARG (EQ1 (0) "," EQ1 (1) "," EQ1 (2) "," EQ1 (3) "," EQ1 (4) "," EQ1 (5) "," EQ1 (5)),                  \
     "syscalls[0].args: must hold at most 6 conditions, one per argument")                                   \
  X (root_array_is_rejected, "[]", "(document): must be an object")                                          \
  X (root_string_is_rejected, "\"SCMP_ACT_ERRNO\"", "(document): must be an object")                         \
  X (invalid_json_is_rejected, RULES (READ_RULE ","), "invalid JSON")                                        \
  X (comment_is_rejected, "{/* no */\"defaultAction\":\"SCMP_ACT_ERRNO\"}", "(document): invalid JSON")      \
  X (duplicate_key_is_rejected,                                                                              \
     "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultAction\":\"SCMP_ACT_KILL_PROCESS\"}",                   \
     "(document): duplicate key \"defaultAction\"")                                                          \
  X (duplicate_key_in_a_rule_is_rejected,                                                                    \
     RULES ("{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"action\":\"SCMP_ACT_ALLOW\"}"),           \
     "syscalls[0]: duplicate key \"action\"")                                                                \
  X (trailing_garbage_is_rejected, RULES (READ_RULE) " {}", "(document): invalid JSON")                      \
  X (empty_document_is_rejected, "", "(document): empty document")                                           \
  X (nesting_deeper_than_8_is_rejected, "{\"syscalls\":[[[[[[[[]]]]]]]]}",                                   \
     "(document): nesting deeper than 8")

#define DEFINE_REJECT(name, doc, fragment)                                                                   \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_reject (doc, sizeof (doc) - 1, fragment);                                                         \
  }                                                                                                          \
  END_TEST
REJECT_ROWS (DEFINE_REJECT)

/* name, document, a statement about the canonical text `text` of the loaded profile */
#define ACCEPT_ROWS(X)                                                                                       \
  X (minimal_profile_is_accepted, RULES (READ_RULE),                                                         \
     ck_assert_str_eq (text,                                                                                 \
                       "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":[\"SCMP_ARCH_X86_64\"],"     \
                       "\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}]}"))              \
  X (conditional_alternatives_are_accepted, RULES (IOCTL (EQ1 (1)) "," IOCTL (EQ1 (2))),                     \
     ck_assert_ptr_nonnull (strstr (text, "\"args\":[{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]},"    \
                                          "{\"names\":[\"ioctl\"]")))                                        \
  X (kill_process_default_is_accepted,                                                                       \
     WITH_DEFAULT ("SCMP_ACT_KILL_PROCESS",                                                                  \
                   READ_RULE ",{\"names\":[\"write\"],\"action\":\"SCMP_ACT_ERRNO\"}"),                      \
     ck_assert_ptr_nonnull (                                                                                 \
         strstr (text, "{\"names\":[\"write\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1}")))             \
  X (kill_process_rule_is_accepted,                                                                          \
     RULES (READ_RULE ",{\"names\":[\"ptrace\"],\"action\":\"SCMP_ACT_KILL_PROCESS\"}"),                     \
     ck_assert_ptr_nonnull (strstr (text, "\"action\":\"SCMP_ACT_KILL_PROCESS\"}")))                         \
  X (every_op_is_accepted,                                                                                   \
     ARG ("{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_NE\"},"                                                \
          "{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_LT\"},"                                                \
          "{\"index\":2,\"value\":1,\"op\":\"SCMP_CMP_LE\"},"                                                \
          "{\"index\":3,\"value\":1,\"op\":\"SCMP_CMP_EQ\"},"                                                \
          "{\"index\":4,\"value\":1,\"op\":\"SCMP_CMP_GE\"},"                                                \
          "{\"index\":5,\"value\":1,\"op\":\"SCMP_CMP_GT\"}"),                                               \
     ck_assert_ptr_nonnull (strstr (text, "{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_NE\"},"                \
                                          "{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_LT\"},"                \
                                          "{\"index\":2,\"value\":1,\"op\":\"SCMP_CMP_LE\"},"                \
                                          "{\"index\":3,\"value\":1,\"op\":\"SCMP_CMP_EQ\"},"                \
                                          "{\"index\":4,\"value\":1,\"op\":\"SCMP_CMP_GE\"},"                \
                                          "{\"index\":5,\"value\":1,\"op\":\"SCMP_CMP_GT\"}]")))             \
  X (masked_eq_without_value_two_means_zero,                                                                 \
     ARG ("{\"index\":0,\"value\":2114060288,\"op\":\"SCMP_CMP_MASKED_EQ\"}"),                               \
     ck_assert_ptr_nonnull (strstr (text, "{\"index\":0,\"value\":2114060288,\"valueTwo\":0,"                \
                                          "\"op\":\"SCMP_CMP_MASKED_EQ\"}")))                                \
  X (uint64_max_value_is_kept_exactly,                                                                       \
     ARG ("{\"index\":5,\"value\":18446744073709551615,\"valueTwo\":18446744073709551615,"                   \
          "\"op\":\"SCMP_CMP_MASKED_EQ\"}"),                                                                 \
     ck_assert_ptr_nonnull (                                                                                 \
         strstr (text, "\"value\":18446744073709551615,\"valueTwo\":18446744073709551615")))                 \
  X (rule_naming_calls_with_the_defaults_eperm_is_accepted,                                                  \
     RULES (READ_RULE ",{\"names\":[\"futex_waitv\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1}"),        \
     ck_assert_ptr_nonnull (strstr (text, "{\"names\":[\"futex_waitv\"],\"action\":\"SCMP_ACT_ERRNO\","      \
                                          "\"errnoRet\":1}")))                                               \
  X (errno_ret_is_kept,                                                                                      \
     RULES (READ_RULE ",{\"names\":[\"clone3\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38}"),            \
     ck_assert_ptr_nonnull (strstr (text, "\"errnoRet\":38}")))                                              \
  X (members_in_any_order_come_out_canonical,                                                                \
     "{\"syscalls\":[{\"args\":[{\"op\":\"SCMP_CMP_EQ\",\"value\":1,\"index\":0}],\"action\":\"SCMP_ACT_"    \
     "ALLOW\","                                                                                              \
     "\"names\":[\"socket\"]}],\"architectures\":" NATIVE ",\"defaultAction\":\"SCMP_ACT_ERRNO\"}",          \
     ck_assert_str_eq (text,                                                                                 \
                       "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":[\"SCMP_ARCH_X86_64\"],"     \
                       "\"syscalls\":[{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":"       \
                       "[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}"))                             \
  X (extra_architecture_is_kept_in_order, PROFILE ("[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X86_64\"]", READ_RULE),   \
     ck_assert_ptr_nonnull (strstr (text, "\"architectures\":[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X86_64\"]")))    \
  X (whitespace_is_not_kept,                                                                                 \
     " \n{ \"defaultAction\" : \"SCMP_ACT_ERRNO\" , \"architectures\" : " NATIVE                             \
     " , \"syscalls\" : [ " READ_RULE " ] }\n",                                                              \
     ck_assert_ptr_null (strchr (text, ' ')))

/* Every accepted document's canonical text loads again to the same text.  */
static void
expect_same_after_reload (const char *text)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *again = load_ok (text, strlen (text));
  cleanup_free char *second = gen_text (again, false);

  ck_assert_str_eq (text, second);
}

#define DEFINE_ACCEPT(name, doc, check)                                                                      \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    cleanup_seccomp_profile struct sp_seccomp_profile *p = load_ok (doc, sizeof (doc) - 1);                  \
    cleanup_free char *text = gen_text (p, false);                                                           \
    check;                                                                                                   \
    expect_same_after_reload (text);                                                                         \
  }                                                                                                          \
  END_TEST
ACCEPT_ROWS (DEFINE_ACCEPT)

START_TEST (unknown_top_level_key_is_named)
{
  static const char doc[] = "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" NATIVE
                            ",\"syscalls\":[" READ_RULE "],\"rationale\":\"see docs\"}";
  expect_reject (doc, sizeof doc - 1, "(document): unknown key \"rationale\"");
}
END_TEST

START_TEST (document_over_64_kib_is_rejected)
{
  size_t len = SP_SECCOMP_MAX_BYTES + 1;
  cleanup_free char *doc = malloc (len);
  static const char head[] = RULES (READ_RULE);

  ck_assert_ptr_nonnull (doc);
  memset (doc, ' ', len);
  memcpy (doc, head, sizeof head - 1);
  expect_reject (doc, len, "(document): larger than 65536 bytes");
  /* The same document within the bound loads: the size alone decided.  */
  {
    cleanup_seccomp_profile struct sp_seccomp_profile *p = load_ok (doc, len - 1);
  }
}
END_TEST

/* n copies of item, comma-separated.  */
static char *
joined (const char *item, size_t n)
{
  size_t cap = n * (strlen (item) + 1) + 1, used = 0;
  char *list = malloc (cap);

  ck_assert_ptr_nonnull (list);
  list[0] = '\0';
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf (list + used, cap - used, "%s%s", i ? "," : "", item);
  return list;
}

START_TEST (more_than_512_rules_are_rejected)
{
  cleanup_free char *rules = joined (READ_RULE, SP_SECCOMP_MAX_RULES + 1);
  cleanup_free char *doc = NULL;

  ck_assert (asprintf (&doc, RULES ("%s"), rules) > 0);
  expect_reject (doc, strlen (doc), "syscalls: must hold at most 512 rules");
}
END_TEST

START_TEST (more_than_1024_names_are_rejected)
{
  cleanup_free char *names = joined ("\"read\"", SP_SECCOMP_MAX_NAMES + 1);
  cleanup_free char *doc = NULL;

  ck_assert (asprintf (&doc, RULES ("{\"names\":[%s],\"action\":\"SCMP_ACT_ALLOW\"}"), names) > 0);
  expect_reject (doc, strlen (doc), "syscalls[0].names: the profile would name more than 1024 system calls");
}
END_TEST

/* 150 system calls, each in its own rule with six 64-bit conditions that no
   other rule shares: about 4700 BPF instructions in under 64 KiB.  */
START_TEST (profile_too_long_for_the_kernel_is_rejected)
{
  size_t cap = SP_SECCOMP_MAX_BYTES, used, k = 0;
  cleanup_free char *doc = malloc (cap);

  ck_assert_ptr_nonnull (doc);
  used = (size_t)snprintf (
      doc, cap, "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":" NATIVE ",\"syscalls\":[");
  for (int nr = 0; nr < 512 && k < 150; nr++)
    {
      cleanup_free char *name = seccomp_syscall_resolve_num_arch (SCMP_ARCH_X86_64, nr);

      if (name == NULL)
        continue;
      used += (size_t)snprintf (doc + used, cap - used,
                                "%s{\"names\":[\"%s\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[",
                                k++ ? "," : "", name);
      for (unsigned a = 0; a < 6; a++)
        used += (size_t)snprintf (doc + used, cap - used,
                                  "%s{\"index\":%u,\"value\":%llu,\"op\":\"SCMP_CMP_GT\"}", a ? "," : "", a,
                                  ((unsigned long long)(a + 1) << 33) + k);
      used += (size_t)snprintf (doc + used, cap - used, "]}");
    }
  used += (size_t)snprintf (doc + used, cap - used, "]}");
  ck_assert_uint_eq (k, 150);
  ck_assert_uint_lt (used, cap);
  expect_reject (doc, used, "(document): compiles to 4693 BPF instructions; the kernel accepts at most 4096");
}
END_TEST

START_TEST (error_leaves_out_null_and_err_set)
{
  static const char doc[] = RULES ("{\"names\":[\"nope\"],\"action\":\"SCMP_ACT_ALLOW\"}");
  struct sp_seccomp_profile *p = (struct sp_seccomp_profile *)1;
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_seccomp_profile_load (doc, sizeof doc - 1, &p, &err), -1);
  ck_assert_ptr_null (p);
  ck_assert_ptr_nonnull (err);
  ck_assert_int_eq (err->status, 0);
  sp_error_release (&err);
}
END_TEST

/* ---- canonical re-emission ---- */

START_TEST (gen_output_parses_with_sp_json_parse)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_free char *text = gen_text (p, false);
  cleanup_json struct sp_json *tree = parse_tree (text);

  ck_assert_int_eq (tree->type, SP_JSON_OBJECT);
  ck_assert_uint_eq (rules_of (tree)->u.array.len, p->n_rules);
}
END_TEST

START_TEST (gen_round_trip_is_byte_identical)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_free char *first = gen_text (p, false);
  cleanup_seccomp_profile struct sp_seccomp_profile *again = load_ok (first, strlen (first));
  cleanup_free char *second = gen_text (again, false);

  ck_assert_str_eq (first, second);
}
END_TEST

START_TEST (gen_is_the_same_every_time)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *a = builtin ();
  cleanup_seccomp_profile struct sp_seccomp_profile *b = builtin ();
  cleanup_free char *one = gen_text (a, false);
  cleanup_free char *two = gen_text (a, false);
  cleanup_free char *three = gen_text (b, false);

  ck_assert_str_eq (one, two);
  ck_assert_str_eq (one, three);
}
END_TEST

START_TEST (gen_keeps_every_rule_and_name_in_source_order)
{
  const char *path = getenv ("SP_SECCOMP_SOURCE");
  cleanup_free char *buf = NULL;
  size_t len = 0;
  sp_error_t err = NULL;
  cleanup_json struct sp_json *source = NULL;
  cleanup_json struct sp_json *tree = builtin_tree ();
  const struct sp_json *want, *got;

  ck_assert_msg (path != NULL, "SP_SECCOMP_SOURCE is not set");
  ck_assert (sp_read_path_capped (path, SP_SECCOMP_MAX_BYTES, &buf, &len, &err) == 0);
  ck_assert (sp_json_parse (buf, len, 16, &source, &err) == 0);
  want = rules_of (source);
  got = rules_of (tree);
  ck_assert_uint_eq (want->u.array.len, got->u.array.len);
  for (size_t i = 0; i < want->u.array.len; i++)
    {
      const struct sp_json *wn = member (want->u.array.items[i], "names");
      const struct sp_json *gn = member (got->u.array.items[i], "names");

      ck_assert_uint_eq (wn->u.array.len, gn->u.array.len);
      for (size_t j = 0; j < wn->u.array.len; j++)
        ck_assert_str_eq (wn->u.array.items[j]->u.string.data, gn->u.array.items[j]->u.string.data);
    }
}
END_TEST

START_TEST (gen_writes_a_member_value)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_free char *text = gen_text (p, true);
  cleanup_json struct sp_json *tree = parse_tree (text);
  const struct sp_json *seccomp = member (tree, "seccomp");

  ck_assert_int_eq (seccomp->type, SP_JSON_OBJECT);
  ck_assert (is_string (member (seccomp, "defaultAction"), "SCMP_ACT_ERRNO"));
}
END_TEST

START_TEST (gen_reports_a_yajl_error)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *p = builtin ();
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);

  /* A map awaiting a key cannot take a map: yajl refuses the first open.  */
  ck_assert_int_eq (yajl_gen_map_open (g), yajl_gen_status_ok);
  ck_assert_int_eq (sp_seccomp_profile_gen (p, g), -1);
}
END_TEST

START_TEST (free_accepts_null)
{
  struct sp_seccomp_profile *p = NULL;

  sp_seccomp_profile_free (NULL);
  sp_seccomp_profile_freep (&p);
  ck_assert_ptr_null (p);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seccomp_profile");
  TCase *shape = tcase_create ("builtin");
  TCase *denied = tcase_create ("denied");
  TCase *loader = tcase_create ("loader");
  TCase *gen = tcase_create ("gen");
  TCase *limits = tcase_create ("limits");

  tcase_add_test (shape, builtin_profile_loads_and_compiles);
  tcase_add_test (shape, builtin_profile_is_the_bytes_of_seccomp_probe_json);
  tcase_add_test (shape, default_action_denies_with_eperm);
  tcase_add_test (shape, architectures_are_x86_64_only);
  tcase_add_test (shape, top_level_has_only_oci_1_0_members);
  tcase_add_test (shape, clone3_is_errno_enosys);
  tcase_add_test (shape, socket_is_af_unix_only);
  tcase_add_test (shape, socketpair_is_af_unix_only);
  tcase_add_test (shape, clone_carries_the_namespace_mask);
  tcase_add_test (shape, personality_is_per_linux_or_query_only);
  tcase_add_test (shape, ioctl_is_limited_to_six_requests);
  tcase_add_test (shape, every_rule_allows_except_clone3_and_the_eperm_names);
  tcase_add_test (shape, calls_442_to_450_are_named_with_eperm_and_nothing_higher);
  tcase_add_test (shape, mmap_is_never_writable_and_executable);
  tcase_add_test (shape, mprotect_never_makes_memory_executable);
  tcase_add_test (shape, renameat2_never_makes_a_whiteout);
  suite_add_tcase (s, shape);

#define ADD_DENIED(name) tcase_add_test (denied, denied_##name##_is_never_allowed);
  DENIED_SYSCALLS (ADD_DENIED)
  suite_add_tcase (s, denied);

#define ADD_ROW(name, ...) tcase_add_test (loader, name);
  REJECT_ROWS (ADD_ROW)
  ACCEPT_ROWS (ADD_ROW)
  tcase_add_test (loader, unknown_top_level_key_is_named);
  tcase_add_test (loader, document_over_64_kib_is_rejected);
  tcase_add_test (loader, more_than_512_rules_are_rejected);
  tcase_add_test (loader, more_than_1024_names_are_rejected);
  tcase_add_test (loader, error_leaves_out_null_and_err_set);
  suite_add_tcase (s, loader);

  /* libseccomp takes seconds to compile this one, more under ASan.  */
  tcase_add_test (limits, profile_too_long_for_the_kernel_is_rejected);
  tcase_set_timeout (limits, 300);
  suite_add_tcase (s, limits);

  tcase_add_test (gen, gen_output_parses_with_sp_json_parse);
  tcase_add_test (gen, gen_round_trip_is_byte_identical);
  tcase_add_test (gen, gen_is_the_same_every_time);
  tcase_add_test (gen, gen_keeps_every_rule_and_name_in_source_order);
  tcase_add_test (gen, gen_writes_a_member_value);
  tcase_add_test (gen, gen_reports_a_yajl_error);
  tcase_add_test (gen, free_accepts_null);
  suite_add_tcase (s, gen);
  return s;
}

SP_CHECK_MAIN (make_suite)
