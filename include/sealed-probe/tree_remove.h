/* TEMPORARY shim until the tree-home branch lands tree_remove.h.  */
#ifndef SEALED_PROBE_TREE_REMOVE_H
#define SEALED_PROBE_TREE_REMOVE_H
#include "../../src/rootfs/rmtree.h"
#define sp_tree_remove_at sp_remove_tree_at
#endif
