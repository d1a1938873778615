/* The seccomp profile: see src/seccomp/profile.h and
   docs/seccomp.md.  Parsing and validation are pure; only the proof that the
   profile compiles touches the OS, and then only a memfd.  */
#define _GNU_SOURCE
#include "seccomp/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "text/json.h"

#include "seccomp/profile_internal.h"

#define ROOT SP_JSON_ROOT_PATH

/* Sizes of error-path buffers, each large enough for the one it extends:
   "syscalls[N]", then ".names[N]" or ".args[N]", then ".op".  */
#define RULE_PATH 32
#define ITEM_PATH 96
#define LEAF_PATH 128

/* What a rule's action falls back to when errnoRet is not written, and what
   runtimes of OCI 1.0.x return for an SCMP_ACT_ERRNO defaultAction.  */
#define DEFAULT_ERRNO EPERM

/* The reasons, quoted by docs/seccomp.md and the tests.  */
#define REASON_ACTION "must be one of \"SCMP_ACT_ALLOW\", \"SCMP_ACT_ERRNO\", \"SCMP_ACT_KILL_PROCESS\""
#define REASON_OP                                                                                            \
  "must be one of \"SCMP_CMP_NE\", \"SCMP_CMP_LT\", \"SCMP_CMP_LE\", \"SCMP_CMP_EQ\", \"SCMP_CMP_GE\", "     \
  "\"SCMP_CMP_GT\", \"SCMP_CMP_MASKED_EQ\""
#define REASON_U64   "must be an integer from 0 to 18446744073709551615"
#define REASON_INDEX "must be an integer from 0 to 5"
#define REASON_ERRNO "must be an integer from 1 to 4095"
#define REASON_REPEAT                                                                                        \
  "a system call may be in several rules only when each of them has args and they share action and "         \
  "errnoRet (they are then alternatives)"

static const struct
{
  const char *name;
  enum sp_seccomp_action action;
} actions[] = {
  { "SCMP_ACT_ALLOW", SP_SECCOMP_ACT_ALLOW },
  { "SCMP_ACT_ERRNO", SP_SECCOMP_ACT_ERRNO },
  { "SCMP_ACT_KILL_PROCESS", SP_SECCOMP_ACT_KILL_PROCESS },
};

static const struct
{
  const char *name;
  enum sp_seccomp_op op;
  enum scmp_compare compare;
} ops[] = {
  { "SCMP_CMP_NE", SP_SECCOMP_CMP_NE, SCMP_CMP_NE },
  { "SCMP_CMP_LT", SP_SECCOMP_CMP_LT, SCMP_CMP_LT },
  { "SCMP_CMP_LE", SP_SECCOMP_CMP_LE, SCMP_CMP_LE },
  { "SCMP_CMP_EQ", SP_SECCOMP_CMP_EQ, SCMP_CMP_EQ },
  { "SCMP_CMP_GE", SP_SECCOMP_CMP_GE, SCMP_CMP_GE },
  { "SCMP_CMP_GT", SP_SECCOMP_CMP_GT, SCMP_CMP_GT },
  { "SCMP_CMP_MASKED_EQ", SP_SECCOMP_CMP_MASKED_EQ, SCMP_CMP_MASKED_EQ },
};

/* The OCI names of the architectures libseccomp 2.5 knows.  */
static const struct
{
  const char *name;
  uint32_t token;
} arches[] = {
  { "SCMP_ARCH_X86", SCMP_ARCH_X86 },
  { "SCMP_ARCH_X86_64", SCMP_ARCH_X86_64 },
  { "SCMP_ARCH_X32", SCMP_ARCH_X32 },
  { "SCMP_ARCH_ARM", SCMP_ARCH_ARM },
  { "SCMP_ARCH_AARCH64", SCMP_ARCH_AARCH64 },
  { "SCMP_ARCH_MIPS", SCMP_ARCH_MIPS },
  { "SCMP_ARCH_MIPS64", SCMP_ARCH_MIPS64 },
  { "SCMP_ARCH_MIPS64N32", SCMP_ARCH_MIPS64N32 },
  { "SCMP_ARCH_MIPSEL", SCMP_ARCH_MIPSEL },
  { "SCMP_ARCH_MIPSEL64", SCMP_ARCH_MIPSEL64 },
  { "SCMP_ARCH_MIPSEL64N32", SCMP_ARCH_MIPSEL64N32 },
  { "SCMP_ARCH_PPC", SCMP_ARCH_PPC },
  { "SCMP_ARCH_PPC64", SCMP_ARCH_PPC64 },
  { "SCMP_ARCH_PPC64LE", SCMP_ARCH_PPC64LE },
  { "SCMP_ARCH_S390", SCMP_ARCH_S390 },
  { "SCMP_ARCH_S390X", SCMP_ARCH_S390X },
  { "SCMP_ARCH_PARISC", SCMP_ARCH_PARISC },
  { "SCMP_ARCH_PARISC64", SCMP_ARCH_PARISC64 },
  { "SCMP_ARCH_RISCV64", SCMP_ARCH_RISCV64 },
};

#define N_ELEMS(a) (sizeof (a) / sizeof ((a)[0]))

static const char *const top_keys[] = { "defaultAction", "architectures", "syscalls", NULL };
static const char *const rule_keys[] = { "names", "action", "errnoRet", "args", NULL };
static const char *const arg_keys[] = { "index", "value", "valueTwo", "op", NULL };

void
sp_seccomp_profile_free (struct sp_seccomp_profile *profile)
{
  if (profile == NULL)
    return;
  for (size_t i = 0; i < profile->n_rules; i++)
    {
      struct sp_seccomp_rule *r = &profile->rules[i];

      for (size_t j = 0; j < r->n_names; j++)
        free (r->names[j]);
      free (r->names);
      free (r->numbers);
      free (r->args);
    }
  free (profile->rules);
  free (profile->arches);
  free (profile);
}

static const char *
action_name (enum sp_seccomp_action action)
{
  for (size_t i = 0; i < N_ELEMS (actions); i++)
    if (actions[i].action == action)
      return actions[i].name;
  return "?";
}

static const char *
op_name (enum sp_seccomp_op op)
{
  for (size_t i = 0; i < N_ELEMS (ops); i++)
    if (ops[i].op == op)
      return ops[i].name;
  return "?";
}

static const char *
arch_name (uint32_t token)
{
  for (size_t i = 0; i < N_ELEMS (arches); i++)
    if (arches[i].token == token)
      return arches[i].name;
  return NULL;
}

/* "path: <what> "value"<tail>", with the value quoted and bounded.  The
   profile is trusted configuration with no secrets, so naming the offending
   string is what helps its editor.  */
static int
quoted_error (sp_error_t *err, const char *path, const char *what, const char *s, size_t len,
              const char *tail)
{
  cleanup_free char *quoted = sp_json_quote (s, len);

  if (quoted == NULL)
    return sp_make_error (err, ENOMEM, "%s", path);
  return sp_make_error (err, 0, "%s: %s%s%s", path, what, quoted, tail);
}

/* The first member of obj, in document order, whose key is not in known.  */
static int
check_keys (const struct sp_json *obj, const char *path, const char *const *known, sp_error_t *err)
{
  for (size_t i = 0; i < obj->u.object.len; i++)
    {
      const char *key = obj->u.object.members[i].key;
      size_t k;

      for (k = 0; known[k] != NULL; k++)
        if (strcmp (key, known[k]) == 0)
          break;
      if (known[k] == NULL)
        return quoted_error (err, path, "unknown key ", key, strlen (key), "");
    }
  return 0;
}

/* A plain decimal integer (no sign, no leading zero, no fraction or
   exponent) that fits in 64 bits.  Pure; sets no error.  */
static int
json_u64 (const struct sp_json *v, uint64_t *out)
{
  const char *s;
  uint64_t n = 0;

  if (v->type != SP_JSON_NUMBER || v->u.number == NULL)
    return -1;
  s = v->u.number;
  if (*s < '0' || *s > '9' || (*s == '0' && s[1] != '\0'))
    return -1;
  for (; *s; s++)
    {
      unsigned d;

      if (*s < '0' || *s > '9')
        return -1;
      d = (unsigned)(*s - '0');
      if (n > (UINT64_MAX - d) / 10)
        return -1;
      n = n * 10 + d;
    }
  *out = n;
  return 0;
}

static int
parse_action (const struct sp_json *v, const char *path, enum sp_seccomp_action *out, sp_error_t *err)
{
  if (v->type != SP_JSON_STRING)
    return sp_make_error (err, 0, "%s: " REASON_ACTION, path);
  for (size_t i = 0; i < N_ELEMS (actions); i++)
    if (strcmp (v->u.string.data, actions[i].name) == 0)
      {
        *out = actions[i].action;
        return 0;
      }
  return quoted_error (err, path, "unknown action ", v->u.string.data, v->u.string.len, "; " REASON_ACTION);
}

static int
parse_arches (const struct sp_json *v, struct sp_seccomp_profile *p, sp_error_t *err)
{
  uint32_t native = seccomp_arch_native ();
  bool has_native = false;
  size_t n;

  if (v->type != SP_JSON_ARRAY || v->u.array.len == 0)
    return sp_make_error (err, 0, "architectures: must be a non-empty array of \"SCMP_ARCH_*\" names");
  n = v->u.array.len;
  if (n > SP_SECCOMP_MAX_ARCHES)
    return sp_make_error (err, 0, "architectures: must hold at most %d names", SP_SECCOMP_MAX_ARCHES);
  p->arches = calloc (n, sizeof (*p->arches));
  if (p->arches == NULL)
    return sp_make_error (err, ENOMEM, "architectures");
  for (size_t i = 0; i < n; i++)
    {
      const struct sp_json *item = v->u.array.items[i];
      char path[RULE_PATH];
      size_t k;

      snprintf (path, sizeof path, "architectures[%zu]", i);
      if (item->type != SP_JSON_STRING)
        return sp_make_error (err, 0, "%s: must be a string", path);
      for (k = 0; k < N_ELEMS (arches); k++)
        if (strcmp (item->u.string.data, arches[k].name) == 0)
          break;
      if (k == N_ELEMS (arches))
        return quoted_error (err, path, "unknown architecture ", item->u.string.data, item->u.string.len, "");
      for (size_t j = 0; j < i; j++)
        if (p->arches[j] == arches[k].token)
          return sp_make_error (err, 0, "%s: duplicate of architectures[%zu]", path, j);
      p->arches[i] = arches[k].token;
      p->n_arches = i + 1;
      has_native |= arches[k].token == native;
    }
  /* A filter for another architecture would not confine this host's
     processes at all, so refuse rather than hand it to a runtime.  */
  if (!has_native)
    {
      const char *name = arch_name (native);
      if (name == NULL)
        return sp_make_error (
            err, 0, "architectures: must include the native architecture (libseccomp token 0x%x)", native);
      return sp_make_error (err, 0, "architectures: must include the native architecture %s", name);
    }
  return 0;
}

static int
resolve_name (const struct sp_json *item, const char *path, int *nr, sp_error_t *err)
{
  const struct scmp_version *ver = seccomp_version ();
  const char *native = arch_name (seccomp_arch_native ());
  char tail[96];

  if (item->type != SP_JSON_STRING)
    return sp_make_error (err, 0, "%s: must be a string", path);
  *nr = seccomp_syscall_resolve_name (item->u.string.data);
  if (*nr >= 0)
    return 0;
  /* __NR_SCMP_ERROR: not in libseccomp's table; other negative numbers are
     pseudo-syscalls, names that exist only on other architectures.  */
  snprintf (tail, sizeof tail, " on %s (libseccomp %u.%u.%u)", native ? native : "the native architecture",
            ver ? ver->major : 0, ver ? ver->minor : 0, ver ? ver->micro : 0);
  return quoted_error (err, path, "unknown system call ", item->u.string.data, item->u.string.len, tail);
}

static int
parse_names (const struct sp_json *v, const char *rule_path, struct sp_seccomp_rule *r, size_t *total,
             sp_error_t *err)
{
  size_t n;

  if (v == NULL)
    return sp_make_error (err, 0, "%s.names: required", rule_path);
  if (v->type != SP_JSON_ARRAY || v->u.array.len == 0)
    return sp_make_error (err, 0, "%s.names: must be a non-empty array of system call names", rule_path);
  n = v->u.array.len;
  if (n > SP_SECCOMP_MAX_NAMES - *total)
    return sp_make_error (err, 0, "%s.names: the profile would name more than %d system calls", rule_path,
                          SP_SECCOMP_MAX_NAMES);
  *total += n;
  r->names = calloc (n, sizeof (*r->names));
  r->numbers = calloc (n, sizeof (*r->numbers));
  if (r->names == NULL || r->numbers == NULL)
    return sp_make_error (err, ENOMEM, "%s.names", rule_path);
  for (size_t j = 0; j < n; j++)
    {
      const struct sp_json *item = v->u.array.items[j];
      char path[ITEM_PATH];

      snprintf (path, sizeof path, "%s.names[%zu]", rule_path, j);
      if (resolve_name (item, path, &r->numbers[j], err) < 0)
        return -1;
      r->names[j] = strdup (item->u.string.data);
      if (r->names[j] == NULL)
        return sp_make_error (err, ENOMEM, "%s", path);
      r->n_names = j + 1;
    }
  return 0;
}

static int
parse_arg (const struct sp_json *v, const char *path, struct sp_seccomp_arg *a, sp_error_t *err)
{
  const struct sp_json *index, *value, *value_two, *op;
  int64_t n;
  size_t k;

  if (v->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "%s: must be an object", path);
  if (check_keys (v, path, arg_keys, err) < 0)
    return -1;
  index = sp_json_object_get (v, "index");
  value = sp_json_object_get (v, "value");
  value_two = sp_json_object_get (v, "valueTwo");
  op = sp_json_object_get (v, "op");
  if (index == NULL)
    return sp_make_error (err, 0, "%s.index: required", path);
  if (sp_json_integer (index, 0, SP_SECCOMP_MAX_ARG_INDEX, &n) < 0)
    return sp_make_error (err, 0, "%s.index: " REASON_INDEX, path);
  a->index = (unsigned)n;
  if (value == NULL)
    return sp_make_error (err, 0, "%s.value: required", path);
  if (json_u64 (value, &a->value) < 0)
    return sp_make_error (err, 0, "%s.value: " REASON_U64, path);
  if (op == NULL)
    return sp_make_error (err, 0, "%s.op: required", path);
  if (op->type != SP_JSON_STRING)
    return sp_make_error (err, 0, "%s.op: " REASON_OP, path);
  for (k = 0; k < N_ELEMS (ops); k++)
    if (strcmp (op->u.string.data, ops[k].name) == 0)
      break;
  if (k == N_ELEMS (ops))
    {
      char sub[LEAF_PATH];

      snprintf (sub, sizeof sub, "%s.op", path);
      return quoted_error (err, sub, "unknown operator ", op->u.string.data, op->u.string.len,
                           "; " REASON_OP);
    }
  a->op = ops[k].op;
  a->value_two = 0;
  if (value_two != NULL)
    {
      /* libseccomp ignores it for every other operator, so writing it there
         is a mistake that would otherwise pass silently.  */
      if (a->op != SP_SECCOMP_CMP_MASKED_EQ)
        return sp_make_error (err, 0, "%s.valueTwo: only with SCMP_CMP_MASKED_EQ", path);
      if (json_u64 (value_two, &a->value_two) < 0)
        return sp_make_error (err, 0, "%s.valueTwo: " REASON_U64, path);
    }
  if (a->op == SP_SECCOMP_CMP_MASKED_EQ && (a->value_two & ~a->value) != 0)
    return sp_make_error (err, 0, "%s.valueTwo: has bits outside the mask in value, so it never matches",
                          path);
  return 0;
}

static int
parse_args (const struct sp_json *v, const char *rule_path, struct sp_seccomp_rule *r, sp_error_t *err)
{
  size_t n;

  if (v->type != SP_JSON_ARRAY || v->u.array.len == 0)
    return sp_make_error (err, 0,
                          "%s.args: must be a non-empty array of conditions (omit it for a rule without any)",
                          rule_path);
  n = v->u.array.len;
  if (n > SP_SECCOMP_MAX_ARG_INDEX + 1)
    return sp_make_error (err, 0, "%s.args: must hold at most %d conditions, one per argument", rule_path,
                          SP_SECCOMP_MAX_ARG_INDEX + 1);
  r->args = calloc (n, sizeof (*r->args));
  if (r->args == NULL)
    return sp_make_error (err, ENOMEM, "%s.args", rule_path);
  for (size_t j = 0; j < n; j++)
    {
      char path[ITEM_PATH];

      snprintf (path, sizeof path, "%s.args[%zu]", rule_path, j);
      if (parse_arg (v->u.array.items[j], path, &r->args[j], err) < 0)
        return -1;
      /* runc turns two conditions on one argument into two rules (OR);
         libseccomp and crun would AND them.  Say it with two rules.  */
      for (size_t k = 0; k < j; k++)
        if (r->args[k].index == r->args[j].index)
          return sp_make_error (err, 0,
                                "%s.index: repeats the index of %s.args[%zu] (runtimes disagree whether two "
                                "conditions on one argument mean AND or OR; write two rules)",
                                path, rule_path, k);
      r->n_args = j + 1;
    }
  return 0;
}

/* The rule does exactly what defaultAction does.  */
static bool
like_default (const struct sp_seccomp_rule *r, const struct sp_seccomp_profile *p)
{
  return r->action == p->default_action
         && (r->action != SP_SECCOMP_ACT_ERRNO || r->errno_ret == DEFAULT_ERRNO);
}

static int
parse_rule (const struct sp_json *v, size_t i, const struct sp_seccomp_profile *p, struct sp_seccomp_rule *r,
            size_t *total, sp_error_t *err)
{
  const struct sp_json *errno_ret, *args, *action;
  char path[RULE_PATH], sub[ITEM_PATH];

  snprintf (path, sizeof path, "syscalls[%zu]", i);
  if (v->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "%s: must be an object", path);
  if (check_keys (v, path, rule_keys, err) < 0)
    return -1;
  if (parse_names (sp_json_object_get (v, "names"), path, r, total, err) < 0)
    return -1;

  action = sp_json_object_get (v, "action");
  if (action == NULL)
    return sp_make_error (err, 0, "%s.action: required", path);
  snprintf (sub, sizeof sub, "%s.action", path);
  if (parse_action (action, sub, &r->action, err) < 0)
    return -1;

  errno_ret = sp_json_object_get (v, "errnoRet");
  r->errno_ret = r->action == SP_SECCOMP_ACT_ERRNO ? DEFAULT_ERRNO : 0;
  if (errno_ret != NULL)
    {
      int64_t n;

      if (r->action != SP_SECCOMP_ACT_ERRNO)
        return sp_make_error (err, 0, "%s.errnoRet: only with SCMP_ACT_ERRNO", path);
      if (sp_json_integer (errno_ret, 1, SP_SECCOMP_ERRNO_MAX, &n) < 0)
        return sp_make_error (err, 0, "%s.errnoRet: " REASON_ERRNO, path);
      r->errno_ret = (uint32_t)n;
    }
  args = sp_json_object_get (v, "args");
  /* Such a rule changes nothing in libseccomp's filter (which refuses it), but
     runc answers ENOSYS for every number above the highest one a profile
     names, so naming calls keeps them at the default's EPERM.  That is its
     only use: it must say so, with errnoRet written and no args.  */
  if (like_default (r, p) && (r->action != SP_SECCOMP_ACT_ERRNO || errno_ret == NULL || args != NULL))
    return sp_make_error (
        err, 0,
        "%s: does what defaultAction does, so it has no effect (a rule that only names calls "
        "for runc's ENOSYS stub writes \"errnoRet\": %d and no args)",
        path, DEFAULT_ERRNO);

  if (args != NULL && parse_args (args, path, r, err) < 0)
    return -1;
  return 0;
}

struct occurrence
{
  int nr;
  size_t rule;
  size_t name;
};

static int
compare_occurrences (const void *a, const void *b)
{
  const struct occurrence *x = a, *y = b;

  if (x->nr != y->nr)
    return (x->nr > y->nr) - (x->nr < y->nr);
  if (x->rule != y->rule)
    return (x->rule > y->rule) - (x->rule < y->rule);
  return (x->name > y->name) - (x->name < y->name);
}

static bool
alternatives (const struct sp_seccomp_rule *a, const struct sp_seccomp_rule *b)
{
  return a->n_args > 0 && b->n_args > 0 && a->action == b->action && a->errno_ret == b->errno_ret;
}

static bool
before (const struct occurrence *a, const struct occurrence *b)
{
  return a->rule < b->rule || (a->rule == b->rule && a->name < b->name);
}

/* A system call (compared by number, so aliases count) may appear twice only
   as alternatives; anything else is ambiguous, because what it means would
   depend on rule order or on the runtime.  Sorting keeps this O(n log n) and
   still names the first offending occurrence in document order.  */
static int
check_repeats (const struct sp_seccomp_profile *p, size_t total, sp_error_t *err)
{
  cleanup_free struct occurrence *occ = NULL;
  const struct occurrence *bad = NULL, *bad_first = NULL;
  size_t n = 0;

  if (total < 2)
    return 0;
  occ = calloc (total, sizeof (*occ));
  if (occ == NULL)
    return sp_make_error (err, ENOMEM, "syscalls");
  for (size_t i = 0; i < p->n_rules; i++)
    for (size_t j = 0; j < p->rules[i].n_names; j++)
      occ[n++] = (struct occurrence){ p->rules[i].numbers[j], i, j };
  qsort (occ, n, sizeof (*occ), compare_occurrences);
  for (size_t s = 0; s < n;)
    {
      size_t e = s + 1;

      for (; e < n && occ[e].nr == occ[s].nr; e++)
        {
          bool conflict = occ[e].rule == occ[e - 1].rule
                          || !alternatives (&p->rules[occ[s].rule], &p->rules[occ[e].rule]);
          if (conflict && (bad == NULL || before (&occ[e], bad)))
            {
              bad = &occ[e];
              bad_first = occ[e].rule == occ[e - 1].rule ? &occ[e - 1] : &occ[s];
            }
        }
      s = e;
    }
  if (bad == NULL)
    return 0;
  if (bad->rule == bad_first->rule)
    return sp_make_error (err, 0, "syscalls[%zu].names[%zu]: repeats syscalls[%zu].names[%zu]", bad->rule,
                          bad->name, bad_first->rule, bad_first->name);
  {
    char path[ITEM_PATH], tail[256];
    const char *name = p->rules[bad->rule].names[bad->name];

    snprintf (path, sizeof path, "syscalls[%zu].names[%zu]", bad->rule, bad->name);
    snprintf (tail, sizeof tail, " is already in syscalls[%zu]; " REASON_REPEAT, bad_first->rule);
    return quoted_error (err, path, "", name, strlen (name), tail);
  }
}

static uint32_t
to_scmp_action (enum sp_seccomp_action action, uint32_t errno_ret)
{
  switch (action)
    {
    case SP_SECCOMP_ACT_ALLOW:
      return SCMP_ACT_ALLOW;
    case SP_SECCOMP_ACT_ERRNO:
      return SCMP_ACT_ERRNO (errno_ret);
    case SP_SECCOMP_ACT_KILL_PROCESS:
    default:
      return SCMP_ACT_KILL_PROCESS;
    }
}

static enum scmp_compare
to_scmp_compare (enum sp_seccomp_op op)
{
  for (size_t i = 0; i < N_ELEMS (ops); i++)
    if (ops[i].op == op)
      return ops[i].compare;
  return _SCMP_CMP_MIN; /* never reached: every op is in the table */
}

int
sp_seccomp_profile_compile (const struct sp_seccomp_profile *profile, scmp_filter_ctx *out, sp_error_t *err)
{
  cleanup_seccomp_ctx scmp_filter_ctx ctx = NULL;
  uint32_t native = seccomp_arch_native ();

  *out = NULL;
  ctx = seccomp_init (to_scmp_action (profile->default_action, DEFAULT_ERRNO));
  if (ctx == NULL)
    return sp_make_error (err, 0, "defaultAction: libseccomp could not create a filter with it");
  for (size_t i = 0; i < profile->n_arches; i++)
    if (profile->arches[i] != native)
      {
        int rc = seccomp_arch_add (ctx, profile->arches[i]);
        if (rc < 0)
          return sp_make_error (err, -rc, "architectures[%zu]: libseccomp refused it", i);
      }
  for (size_t i = 0; i < profile->n_rules; i++)
    {
      const struct sp_seccomp_rule *r = &profile->rules[i];
      struct scmp_arg_cmp conds[SP_SECCOMP_MAX_ARG_INDEX + 1];

      /* A rule that only names calls (parse_rule) is the default here.  */
      if (like_default (r, profile))
        continue;
      for (size_t k = 0; k < r->n_args; k++)
        conds[k] = (struct scmp_arg_cmp){
          .arg = r->args[k].index,
          .op = to_scmp_compare (r->args[k].op),
          .datum_a = r->args[k].value,
          .datum_b = r->args[k].value_two,
        };
      for (size_t j = 0; j < r->n_names; j++)
        {
          int rc = seccomp_rule_add_array (ctx, to_scmp_action (r->action, r->errno_ret), r->numbers[j],
                                           (unsigned)r->n_args, conds);
          if (rc < 0)
            return sp_make_error (err, -rc, "syscalls[%zu].names[%zu]: libseccomp refused the rule", i, j);
        }
    }
  *out = get_and_reset (&ctx);
  return 0;
}

/* Compiles the profile to BPF into a memfd (never into this process) and
   checks what the kernel would check first: the program's length.  */
static int
prove_compiles (const struct sp_seccomp_profile *p, sp_error_t *err)
{
  cleanup_seccomp_ctx scmp_filter_ctx ctx = NULL;
  cleanup_close int fd = -1;
  off_t size;
  int rc;

  if (sp_seccomp_profile_compile (p, &ctx, err) < 0)
    return -1;
  fd = memfd_create ("sealed-probe-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "compile the profile: memfd_create");
  rc = seccomp_export_bpf (ctx, fd);
  if (rc < 0)
    return sp_make_error (err, -rc, "compile the profile to BPF");
  size = lseek (fd, 0, SEEK_END);
  if (size < 0)
    return sp_make_error (err, errno, "compile the profile: measure the BPF program");
  if (size == 0 || size % (off_t)sizeof (struct sock_filter) != 0)
    return sp_make_error (err, 0, "compile the profile: libseccomp wrote %lld bytes, not a BPF program",
                          (long long)size);
  if (size / (off_t)sizeof (struct sock_filter) > SP_SECCOMP_BPF_MAX_INSNS)
    return sp_make_error (err, 0, ROOT ": compiles to %lld BPF instructions; the kernel accepts at most %d",
                          (long long)(size / (off_t)sizeof (struct sock_filter)), SP_SECCOMP_BPF_MAX_INSNS);
  return 0;
}

int
sp_seccomp_profile_load (const char *json, size_t len, struct sp_seccomp_profile **out, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  cleanup_seccomp_profile struct sp_seccomp_profile *p = NULL;
  const struct sp_json *v;
  size_t total = 0;

  *out = NULL;
  if (len > SP_SECCOMP_MAX_BYTES)
    return sp_make_error (err, 0, ROOT ": larger than %d bytes", SP_SECCOMP_MAX_BYTES);
  if (sp_json_parse (json, len, SP_SECCOMP_MAX_DEPTH, &doc, err) < 0)
    return -1;
  if (doc->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, ROOT ": must be an object");
  if (check_keys (doc, ROOT, top_keys, err) < 0)
    return -1;
  p = calloc (1, sizeof (*p));
  if (p == NULL)
    return sp_make_error (err, ENOMEM, "allocate the seccomp profile");

  v = sp_json_object_get (doc, "defaultAction");
  if (v == NULL)
    return sp_make_error (err, 0, "defaultAction: required");
  if (parse_action (v, "defaultAction", &p->default_action, err) < 0)
    return -1;
  if (p->default_action == SP_SECCOMP_ACT_ALLOW)
    return sp_make_error (err, 0, "defaultAction: must deny (the profile is an allowlist)");

  v = sp_json_object_get (doc, "architectures");
  if (v == NULL)
    return sp_make_error (err, 0, "architectures: required");
  if (parse_arches (v, p, err) < 0)
    return -1;

  v = sp_json_object_get (doc, "syscalls");
  if (v == NULL)
    return sp_make_error (err, 0, "syscalls: required");
  if (v->type != SP_JSON_ARRAY || v->u.array.len == 0)
    return sp_make_error (err, 0, "syscalls: must be a non-empty array of rules");
  if (v->u.array.len > SP_SECCOMP_MAX_RULES)
    return sp_make_error (err, 0, "syscalls: must hold at most %d rules", SP_SECCOMP_MAX_RULES);
  p->rules = calloc (v->u.array.len, sizeof (*p->rules));
  if (p->rules == NULL)
    return sp_make_error (err, ENOMEM, "syscalls");
  p->n_rules = v->u.array.len;
  for (size_t i = 0; i < p->n_rules; i++)
    if (parse_rule (v->u.array.items[i], i, p, &p->rules[i], &total, err) < 0)
      return -1;
  if (check_repeats (p, total, err) < 0)
    return -1;

  if (prove_compiles (p, err) < 0)
    return -1;
  *out = get_and_reset (&p);
  return 0;
}

int
sp_seccomp_profile_load_builtin (struct sp_seccomp_profile **out, sp_error_t *err)
{
  if (sp_seccomp_profile_load ((const char *)sp_seccomp_builtin_json, sp_seccomp_builtin_json_len, out, err)
      < 0)
    return sp_error_wrap (err, "built-in seccomp profile (seccomp/probe.json)");
  return 0;
}

static int
gen_string (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s)) == yajl_gen_status_ok ? 0 : -1;
}

static int
gen_u64 (yajl_gen g, uint64_t v)
{
  char buf[24];
  int n = snprintf (buf, sizeof buf, "%" PRIu64, v);

  /* yajl_gen_integer takes a long long, which would turn large masks
     negative; the text form keeps every uint64 exact.  */
  return yajl_gen_number (g, buf, (size_t)n) == yajl_gen_status_ok ? 0 : -1;
}

static int
gen_rule (const struct sp_seccomp_rule *r, bool enosys_by_kernel, yajl_gen g)
{
  enum sp_seccomp_action action = r->action;

  if (enosys_by_kernel && action == SP_SECCOMP_ACT_ERRNO && r->errno_ret == ENOSYS)
    action = SP_SECCOMP_ACT_ALLOW;
  if (yajl_gen_map_open (g) != yajl_gen_status_ok || gen_string (g, "names") < 0
      || yajl_gen_array_open (g) != yajl_gen_status_ok)
    return -1;
  for (size_t j = 0; j < r->n_names; j++)
    if (gen_string (g, r->names[j]) < 0)
      return -1;
  if (yajl_gen_array_close (g) != yajl_gen_status_ok || gen_string (g, "action") < 0
      || gen_string (g, action_name (action)) < 0)
    return -1;
  /* Always written for SCMP_ACT_ERRNO, so no runtime's default matters.  */
  if (action == SP_SECCOMP_ACT_ERRNO && (gen_string (g, "errnoRet") < 0 || gen_u64 (g, r->errno_ret) < 0))
    return -1;
  if (r->n_args > 0)
    {
      if (gen_string (g, "args") < 0 || yajl_gen_array_open (g) != yajl_gen_status_ok)
        return -1;
      for (size_t k = 0; k < r->n_args; k++)
        {
          const struct sp_seccomp_arg *a = &r->args[k];

          if (yajl_gen_map_open (g) != yajl_gen_status_ok || gen_string (g, "index") < 0
              || gen_u64 (g, a->index) < 0 || gen_string (g, "value") < 0 || gen_u64 (g, a->value) < 0)
            return -1;
          if (a->op == SP_SECCOMP_CMP_MASKED_EQ
              && (gen_string (g, "valueTwo") < 0 || gen_u64 (g, a->value_two) < 0))
            return -1;
          if (gen_string (g, "op") < 0 || gen_string (g, op_name (a->op)) < 0
              || yajl_gen_map_close (g) != yajl_gen_status_ok)
            return -1;
        }
      if (yajl_gen_array_close (g) != yajl_gen_status_ok)
        return -1;
    }
  return yajl_gen_map_close (g) == yajl_gen_status_ok ? 0 : -1;
}

static int
profile_gen (const struct sp_seccomp_profile *profile, bool enosys_by_kernel, yajl_gen g)
{
  if (yajl_gen_map_open (g) != yajl_gen_status_ok || gen_string (g, "defaultAction") < 0
      || gen_string (g, action_name (profile->default_action)) < 0 || gen_string (g, "architectures") < 0
      || yajl_gen_array_open (g) != yajl_gen_status_ok)
    return -1;
  for (size_t i = 0; i < profile->n_arches; i++)
    {
      const char *name = arch_name (profile->arches[i]);
      if (name == NULL || gen_string (g, name) < 0)
        return -1;
    }
  if (yajl_gen_array_close (g) != yajl_gen_status_ok || gen_string (g, "syscalls") < 0
      || yajl_gen_array_open (g) != yajl_gen_status_ok)
    return -1;
  for (size_t i = 0; i < profile->n_rules; i++)
    if (gen_rule (&profile->rules[i], enosys_by_kernel, g) < 0)
      return -1;
  if (yajl_gen_array_close (g) != yajl_gen_status_ok)
    return -1;
  return yajl_gen_map_close (g) == yajl_gen_status_ok ? 0 : -1;
}

int
sp_seccomp_profile_gen (const struct sp_seccomp_profile *profile, yajl_gen g)
{
  return profile_gen (profile, false, g);
}

int
sp_seccomp_profile_gen_enosys_by_kernel (const struct sp_seccomp_profile *profile, yajl_gen g)
{
  return profile_gen (profile, true, g);
}
