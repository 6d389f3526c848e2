// SPDX-License-Identifier: GPL-2.0
/*
 * kselftest (TAP): real hot-unplug of the device under test while it is
 * in use, then re-plug.  Runs in the emulated node, which can delete and
 * re-add the "GPU" through QEMU on request (emunode-host device_del gpu /
 * device_add gpu); the slot is the switch downstream port, handled by the
 * guest's pciehp.
 *
 * With a CPU mapping of a handle, a CPU mapping of a dma-buf, and an edu
 * import of that dma-buf doing DMA in a loop, the device is removed:
 *  - the DMA loop stops with -ENODEV and the import reads revoked,
 *  - touching either mapping raises SIGBUS,
 *  - QUERY/EXPORT of the handle answer -ENODEV, ALLOC on the device too;
 * after everything is closed, re-plugged and bound again (driver_override
 * + /sys/bus/pci/drivers/gdrpeer/bind), the device serves: ALLOC, EXPORT
 * and an edu DMA whose bytes read back right, and all gauges are 0.
 *
 * Needs gdrpeer as the PCI driver of the device (PCI_DRIVER_DIR present;
 * skips and says so otherwise), gdrpeer_edu_hca.ko, $GDRPEER_GPU_BDF, and
 * the device bound at start (insmod gdrpeer.ko pcibar=$GDRPEER_GPU_BDF).
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "gdrpeer_test.h"
#include "../kmod/gdrpeer_edu_hca.h"
#include "kselftest.h"

#define PCI_DRIVER_DIR "/sys/bus/pci/drivers/gdrpeer"
#define SIZE (64 * 1024)

static int wait_present(const char *bdf, int want, int seconds)
{
	char path[128];
	int i;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", bdf);
	for (i = 0; i < seconds * 10; i++) {
		if ((access(path, F_OK) == 0) == want)
			return 1;
		usleep(100000);
	}
	return 0;
}

struct dma_loop {
	int hca;
	uint32_t id;
	unsigned long done;
	int err;		/* first error, -errno */
	uint64_t mismatches;
};

static void *dma_loop_main(void *arg)
{
	struct dma_loop *l = arg;

	for (;;) {
		struct edu_hca_import_dma d = { .id = l->id, .length = 2048,
						.seed = l->done + 1 };
		int ret = gp_ioctl(l->hca, EDU_HCA_IOCTL_IMPORT_DMA, &d);

		l->mismatches += d.mismatches;
		if (ret) {
			l->err = ret;
			return NULL;
		}
		l->done++;
	}
}

int main(void)
{
	const char *bdf = getenv("GDRPEER_GPU_BDF");
	struct edu_hca_import im = { 0 };
	struct edu_hca_import_state st = { 0 };
	struct gdrpeer_alloc a;
	struct gdrpeer_query q;
	struct dma_loop loop = { 0 };
	pthread_t tid;
	struct gp_dev dut;
	uint8_t *hmap, *bmap;
	int fd, hca, buf, ret, status;
	char path[160];

	ksft_print_header();
	if (!bdf || !*bdf)
		ksft_exit_skip("needs GDRPEER_GPU_BDF (emulated node)\n");
	if (access(PCI_DRIVER_DIR, F_OK))
		ksft_exit_skip("%s absent: gdrpeer is not the device's PCI driver in this build, "
			       "so PCI removal cannot revoke (issue 12, defect 1)\n", PCI_DRIVER_DIR);
	if (access("/usr/bin/emunode-host", X_OK))
		ksft_exit_skip("emunode-host absent: not in the emulated node\n");
	ksft_set_plan(9);
	bus_install();

	fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0 || hca < 0)
		ksft_exit_fail_msg("open: %s (gdrpeer.ko and gdrpeer_edu_hca.ko loaded?)\n",
				   strerror(errno));
	if (gp_find_device(fd, &dut))
		ksft_exit_fail_msg("device %s is not bound\n", bdf);

	/* in use: a handle mapped, a dma-buf mapped and imported, DMA running */
	ret = gp_alloc(fd, dut.info.index, SIZE, &a);
	if (ret)
		ksft_exit_fail_msg("ALLOC: %s\n", strerror(-ret));
	hmap = gp_mmap(fd, SIZE, MAP_SHARED, a.mmap_offset, &ret);
	buf = gp_export(fd, a.handle, 0, SIZE);
	if (!hmap || buf < 0)
		ksft_exit_fail_msg("mmap/EXPORT: %s\n", strerror(ret ? ret : -buf));
	bmap = gp_mmap(buf, SIZE, MAP_SHARED, 0, &ret);
	if (!bmap)
		ksft_exit_fail_msg("mmap of the dma-buf: %s\n", strerror(ret));
	hmap[0] = 1;
	bmap[8] = 2;
	im.dmabuf_fd = buf;
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT, &im);
	if (ret)
		ksft_exit_fail_msg("edu IMPORT: %s\n", strerror(-ret));
	loop.hca = hca;
	loop.id = im.id;
	pthread_create(&tid, NULL, dma_loop_main, &loop);
	while (!loop.done && !loop.err)
		usleep(10000);

	/* pull the device */
	status = system("emunode-host device_del gpu");
	ksft_test_result(status == 0 && wait_present(bdf, 0, 30),
			 "device_del: %s gone while in use (emunode-host status %d)\n", bdf, status);
	pthread_join(tid, NULL);
	ksft_test_result(loop.err == -ENODEV && !loop.mismatches,
			 "edu DMA loop: %lu DMAs, then %s (want ENODEV), %llu bytes wrong\n",
			 loop.done, strerror(-loop.err), (unsigned long long)loop.mismatches);
	st.id = im.id;
	ret = gp_ioctl(hca, EDU_HCA_IOCTL_IMPORT_STATE, &st);
	ksft_test_result(!ret && st.revoked == 1 && st.nents == 0,
			 "edu import revoked (state %s, revoked %u, nents %llu)\n",
			 strerror(-ret), st.revoked, (unsigned long long)st.nents);
	ksft_test_result(faults_on_read_and_write(hmap),
			 "handle mapping: SIGBUS on read and write\n");
	ksft_test_result(faults_on_read_and_write(bmap),
			 "dma-buf mapping: SIGBUS on read and write\n");
	{
		int rq = gp_query(fd, a.handle, &q);
		int rx = gp_export(fd, a.handle, 0, SIZE);
		struct gdrpeer_alloc a2;
		int ra = gp_alloc(fd, dut.info.index, SIZE, &a2);

		if (rx >= 0)
			close(rx);
		ksft_test_result(rq == -ENODEV && rx == -ENODEV && (ra == -ENODEV),
				 "QUERY %s, EXPORT %s, ALLOC %s (want ENODEV)\n", strerror(-rq),
				 rx >= 0 ? "succeeded" : strerror(-rx), strerror(-ra));
	}

	/* let go of everything, plug it back, bind, serve */
	munmap(hmap, SIZE);
	munmap(bmap, SIZE);
	close(hca);
	close(buf);
	close(fd);
	status = system("emunode-host device_add gpu");
	ret = status == 0 && wait_present(bdf, 1, 30) ? 0 : -1;
	/* sysfs shows the function before the PCI core has finished adding it */
	sleep(2);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", bdf);
	if (!ret && access(path, F_OK) == 0)
		ret = -2;	/* it must come back unbound */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", bdf);
	if (!ret)
		ret = gp_write_file(path, "gdrpeer");
	if (!ret)
		ret = gp_write_file(PCI_DRIVER_DIR "/bind", bdf);
	ksft_test_result(!ret, "device_add, comes back unbound, driver_override, bind: %s\n",
			 ret == -1 ? "device did not come back" :
			 ret == -2 ? "already bound after re-plug" : strerror(ret));

	fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	hca = open(EDU_HCA_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ret = fd < 0 || hca < 0 ? -EBADF : gp_find_device(fd, &dut);
	if (!ret)
		ret = gp_alloc(fd, dut.info.index, SIZE, &a);
	buf = ret ? ret : gp_export(fd, a.handle, 0, SIZE);
	{
		struct edu_hca_dma d = { .dmabuf_fd = buf, .offset = 4096, .length = 4096,
					 .seed = 0x5eed };

		ret = buf < 0 ? buf : gp_ioctl(hca, EDU_HCA_IOCTL_DMA, &d);
		ksft_test_result(!ret && !d.mismatches && d.transfers,
				 "serves again: ALLOC, EXPORT, edu DMA %s, %llu bytes wrong\n",
				 strerror(-ret), (unsigned long long)d.mismatches);
	}
	if (buf >= 0)
		close(buf);
	if (fd >= 0) {
		gp_free(fd, a.handle);
		close(fd);
	}
	if (hca >= 0)
		close(hca);
	fd = open(GDRPEER_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ret = fd < 0 ? -errno : gp_find_device(fd, &dut);
	if (fd >= 0)
		close(fd);
	ksft_test_result(!ret && gp_sysfs(dut.info.index, "allocations") == 0 &&
			 gp_sysfs(dut.info.index, "exports") == 0 &&
			 gp_sysfs(dut.info.index, "attachments") == 0 &&
			 gp_sysfs(dut.info.index, "active_maps") == 0,
			 "gauges 0 after the re-plugged device served\n");
	ksft_finished();
}
