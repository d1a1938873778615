/* Each sealed-probe-rootfs command's options as --help prints them:
   generated at build time from sealed-probe-rootfs(8) by man/help_text.py,
   so that the page and --help cannot drift.  */
#ifndef SP_ROOTFS_HELP_H
#define SP_ROOTFS_HELP_H

/* The options of command, an entry each with its meaning and default, or
   NULL for a command the page does not document.  */
const char *sp_rootfs_help_options (const char *command);

#endif
