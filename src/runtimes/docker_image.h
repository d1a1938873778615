/* The Docker backend's image (docs/runtimes.md, "Docker"): the verified
   rootfs imported as one layer, labelled with its digest, never pulled
   (docker_image.c).  Private to runtimes/.  */
#ifndef SP_RUNTIMES_DOCKER_IMAGE_H
#define SP_RUNTIMES_DOCKER_IMAGE_H

#include "base/error.h"

#define DOCKER_IMAGE_REPO   "sealed-probe/rootfs"
#define DOCKER_LABEL_ROOTFS "org.sealed-probe.rootfs.digest"
/* The import of a 35 MB rootfs, on a busy machine.  */
#define DOCKER_IMPORT_TIMEOUT_MS (120 * 1000)

/* DOCKER_IMAGE_REPO:<12 hex of digest>, allocated.  */
int docker_image_name (const char *digest, char **image, sp_error_t *err);

/* The image DOCKER_IMAGE_REPO:<12 hex of digest>, labelled with the
   digest, whose one layer is the digest of rootfs_root's tar (made the same
   way every time): imported from rootfs_root when absent, refused when its
   label or its layer differs.  *image_ref and *layer (the layer's
   "sha256:<hex>") are allocated.  */
int docker_image_ensure (const char *socket, const char *rootfs_root, const char *digest, char **image_ref,
                         char **layer, sp_error_t *err);

/* Image, as it is now, has digest's label and exactly the one layer: the
   check before every use.  Refusals name the image.  */
int docker_image_check (const char *socket, const char *image, const char *digest, const char *layer,
                        sp_error_t *err);

#endif
