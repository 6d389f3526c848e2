// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia_peermem.ko (built from this file, see Kbuild) - test only: a
 * module that has nothing but NVIDIA's peer-memory client's name, so that
 * /sys/module/nvidia_peermem exists.  gdrpeer decides who serves CUDA
 * addresses by that presence (peermem_cuda=auto leaves them to it); the
 * tests load this to see that decision, its status line and the override.
 * It registers no peer-memory client and serves nothing.
 */
#include <linux/module.h>

static int __init nvpeermem_name_init(void)
{
	pr_info("test stand-in: the name nvidia_peermem only, no peer-memory client\n");
	return 0;
}

static void __exit nvpeermem_name_exit(void)
{
}

module_init(nvpeermem_name_init);
module_exit(nvpeermem_name_exit);

MODULE_DESCRIPTION("gdrpeer test: the name of NVIDIA's peer-memory client, nothing else");
MODULE_LICENSE("GPL");
