/* The system calls the probe's profile must never allow (docs/seccomp.md,
   "Denied").  check_seccomp_profile asserts that no rule names them but the
   one that names calls only to keep them EPERM under runc;
   check_seccomp_enforce calls each one, with every argument -1, under the
   installed filter and expects EPERM.  Every argument -1 makes each call
   harmless even if a broken filter let it through: bad pointers, bad fds,
   bad flags or bad magic numbers.  */
#ifndef SP_TEST_SECCOMP_DENIED_H
#define SP_TEST_SECCOMP_DENIED_H

#define DENIED_SYSCALLS(X)                                                                                   \
  /* io_uring: a second syscall surface that seccomp cannot see into */                                      \
  X (io_uring_setup)                                                                                         \
  X (io_uring_enter)                                                                                         \
  X (io_uring_register)                                                                                      \
  /* looking into or driving other processes */                                                              \
  X (ptrace)                                                                                                 \
  X (process_vm_readv)                                                                                       \
  X (process_vm_writev)                                                                                      \
  X (kcmp)                                                                                                   \
  X (pidfd_getfd)                                                                                            \
  X (process_madvise)                                                                                        \
  X (process_mrelease)                                                                                       \
  X (get_robust_list)                                                                                        \
  /* kernel programmability and introspection */                                                             \
  X (bpf)                                                                                                    \
  X (perf_event_open)                                                                                        \
  X (userfaultfd)                                                                                            \
  X (lookup_dcookie)                                                                                         \
  X (syslog)                                                                                                 \
  X (seccomp)                                                                                                \
  X (prctl)                                                                                                  \
  /* keyrings */                                                                                             \
  X (keyctl)                                                                                                 \
  X (add_key)                                                                                                \
  X (request_key)                                                                                            \
  /* mounts, namespaces and the root */                                                                      \
  X (mount)                                                                                                  \
  X (umount2)                                                                                                \
  X (mount_setattr)                                                                                          \
  X (fsopen)                                                                                                 \
  X (fsconfig)                                                                                               \
  X (fsmount)                                                                                                \
  X (fspick)                                                                                                 \
  X (move_mount)                                                                                             \
  X (open_tree)                                                                                              \
  X (pivot_root)                                                                                             \
  X (chroot)                                                                                                 \
  X (unshare)                                                                                                \
  X (setns)                                                                                                  \
  X (open_by_handle_at)                                                                                      \
  X (name_to_handle_at)                                                                                      \
  X (quotactl)                                                                                               \
  X (quotactl_fd)                                                                                            \
  /* the machine: kexec, modules, power, swap, clocks, I/O ports */                                          \
  X (kexec_load)                                                                                             \
  X (kexec_file_load)                                                                                        \
  X (init_module)                                                                                            \
  X (finit_module)                                                                                           \
  X (delete_module)                                                                                          \
  X (create_module)                                                                                          \
  X (reboot)                                                                                                 \
  X (swapon)                                                                                                 \
  X (swapoff)                                                                                                \
  X (acct)                                                                                                   \
  X (settimeofday)                                                                                           \
  X (clock_settime)                                                                                          \
  X (clock_adjtime)                                                                                          \
  X (adjtimex)                                                                                               \
  X (iopl)                                                                                                   \
  X (ioperm)                                                                                                 \
  X (vhangup)                                                                                                \
  X (sethostname)                                                                                            \
  X (setdomainname)                                                                                          \
  X (uselib)                                                                                                 \
  X (_sysctl)                                                                                                \
  X (ustat)                                                                                                  \
  /* host-wide memory and task counts (docs/threat-model.md, "Host-wide state") */                           \
  X (sysinfo)                                                                                                \
  X (sysfs)                                                                                                  \
  X (fanotify_init)                                                                                          \
  X (fanotify_mark)                                                                                          \
  /* credentials: no capabilities, so nothing to change them to */                                           \
  X (setuid)                                                                                                 \
  X (setgid)                                                                                                 \
  X (setreuid)                                                                                               \
  X (setregid)                                                                                               \
  X (setresuid)                                                                                              \
  X (setresgid)                                                                                              \
  X (setfsuid)                                                                                               \
  X (setfsgid)                                                                                               \
  X (setgroups)                                                                                              \
  X (capset)                                                                                                 \
  /* NUMA placement */                                                                                       \
  X (mbind)                                                                                                  \
  X (set_mempolicy)                                                                                          \
  X (set_mempolicy_home_node)                                                                                \
  X (move_pages)                                                                                             \
  X (migrate_pages)                                                                                          \
  /* running bytes that are not a file in the rootfs */                                                      \
  X (memfd_create)                                                                                           \
  X (memfd_secret)                                                                                           \
  X (execveat)                                                                                               \
  /* memory that becomes executable: mprotect has a rule, this has none */                                   \
  X (pkey_mprotect)                                                                                          \
  /* page-cache splicing (the Dirty Pipe class); sendfile into a pipe splices */                             \
  X (sendfile)                                                                                               \
  X (splice)                                                                                                 \
  X (tee)                                                                                                    \
  X (vmsplice)                                                                                               \
  /* System V and POSIX message IPC, unused by the standard library */                                       \
  X (shmget)                                                                                                 \
  X (shmat)                                                                                                  \
  X (shmctl)                                                                                                 \
  X (shmdt)                                                                                                  \
  X (msgget)                                                                                                 \
  X (msgsnd)                                                                                                 \
  X (msgrcv)                                                                                                 \
  X (msgctl)                                                                                                 \
  X (semget)                                                                                                 \
  X (semop)                                                                                                  \
  X (semtimedop)                                                                                             \
  X (semctl)                                                                                                 \
  X (mq_open)                                                                                                \
  X (mq_unlink)                                                                                              \
  X (mq_timedsend)                                                                                           \
  X (mq_timedreceive)                                                                                        \
  X (mq_notify)                                                                                              \
  X (mq_getsetattr)                                                                                          \
  /* device nodes, global flushes, pinned memory, scheduling of others */                                    \
  X (mknod)                                                                                                  \
  X (mknodat)                                                                                                \
  X (sync)                                                                                                   \
  X (syncfs)                                                                                                 \
  X (mlock)                                                                                                  \
  X (mlock2)                                                                                                 \
  X (mlockall)                                                                                               \
  X (sched_setaffinity)                                                                                      \
  X (sched_setscheduler)                                                                                     \
  X (sched_setparam)                                                                                         \
  X (sched_setattr)                                                                                          \
  X (setpriority)                                                                                            \
  X (ioprio_set)                                                                                             \
  /* writing extended attributes */                                                                          \
  X (setxattr)                                                                                               \
  X (lsetxattr)                                                                                              \
  X (fsetxattr)                                                                                              \
  X (removexattr)                                                                                            \
  X (lremovexattr)                                                                                           \
  X (fremovexattr)                                                                                           \
  /* inotify: nothing in a one-shot probe waits on file changes */                                           \
  X (inotify_init)                                                                                           \
  X (inotify_init1)                                                                                          \
  X (inotify_add_watch)                                                                                      \
  /* newer calls that nothing here needs: sandboxing itself, futex vectors */                                \
  X (landlock_create_ruleset)                                                                                \
  X (landlock_add_rule)                                                                                      \
  X (landlock_restrict_self)                                                                                 \
  X (futex_waitv)

#endif
