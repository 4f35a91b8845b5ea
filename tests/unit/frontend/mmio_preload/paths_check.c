/* /sys/bus/pci/devices paths of rpcie functions as C programs reach them beyond open():
 * scandir/scandir64, fdopendir, openat/fstatat/faccessat/statx/readlinkat relative to a
 * descriptor of /sys/bus/pci/devices or /sys/bus/pci, relative paths after chdir, and the
 * __xstat family old binaries call. Run under librpcie-mmio.so with RPCIE_MOUNT holding
 * pci/devices/10000:00:00.0 (vendor "0x1234\n", a resource0 of 4096 bytes) and
 * pci/devices/10001:00:01.0; prints "paths: ok" or the first failure (exit 1).
 *   paths_check */
#define _GNU_SOURCE
#undef _FILE_OFFSET_BITS /* scandir and scandir64 are two symbols, both interposed */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEVICES "/sys/bus/pci/devices"
#define EXPECT(cond, ...)                           \
  do {                                              \
    if (!(cond)) {                                  \
      fprintf(stderr, "paths_check: " __VA_ARGS__); \
      fprintf(stderr, " (errno %d)\n", errno);      \
      exit(1);                                      \
    }                                               \
  } while (0)

static int rpcie_only(const struct dirent* e) { return strncmp(e->d_name, "1000", 4) == 0; }
static int rpcie_only64(const struct dirent64* e) { return strncmp(e->d_name, "1000", 4) == 0; }
static int not_10001(const struct dirent* e) { return strcmp(e->d_name, "10001:00:01.0") != 0; }

static void vendor_read(int dirfd, const char* path) {
  char text[16] = {0};
  int fd = openat(dirfd, path, O_RDONLY);
  EXPECT(fd >= 0, "openat(%d, %s)", dirfd, path);
  EXPECT(read(fd, text, sizeof text - 1) == 7 && strcmp(text, "0x1234\n") == 0, "%s read '%s'", path, text);
  close(fd);
}

static void scans(void) {
  struct dirent** names;
  int n = scandir(DEVICES, &names, rpcie_only, alphasort);
  EXPECT(n == 2, "scandir found %d rpcie functions", n);
  EXPECT(strcmp(names[0]->d_name, "10000:00:00.0") == 0 && strcmp(names[1]->d_name, "10001:00:01.0") == 0,
         "scandir order %s %s", names[0]->d_name, names[1]->d_name);
  EXPECT(names[0]->d_type == DT_LNK, "d_type %d", names[0]->d_type);
  for (int i = 0; i < n; ++i) free(names[i]);
  free(names);
  n = scandir(DEVICES, &names, not_10001, alphasort); /* the real ones, then 10000 sorted last */
  EXPECT(n >= 1 && strcmp(names[n - 1]->d_name, "10000:00:00.0") == 0, "scandir filter: %d, last %s", n,
         n > 0 ? names[n - 1]->d_name : "-");
  for (int i = 0; i < n; ++i) EXPECT(strcmp(names[i]->d_name, "10001:00:01.0") != 0, "filter ignored");
  for (int i = 0; i < n; ++i) free(names[i]);
  free(names);
  struct dirent64** names64;
  n = scandir64(DEVICES "/", &names64, rpcie_only64, alphasort64);
  EXPECT(n == 2 && strcmp(names64[1]->d_name, "10001:00:01.0") == 0, "scandir64 found %d", n);
  for (int i = 0; i < n; ++i) free(names64[i]);
  free(names64);
  n = scandir(DEVICES "/10000:00:00.0", &names, NULL, alphasort); /* the device directory itself */
  int vendor = 0;
  for (int i = 0; i < n; ++i) vendor += strcmp(names[i]->d_name, "vendor") == 0, free(names[i]);
  EXPECT(n > 0 && vendor == 1, "scandir of the function: %d entries", n);
  free(names);
}

static void relative(int devices, int pci) {
  struct stat st;
  vendor_read(devices, "10000:00:00.0/vendor");
  vendor_read(devices, "./10000:00:00.0/vendor");
  vendor_read(pci, "devices/10000:00:00.0/vendor");
  EXPECT(fstatat(devices, "10000:00:00.0/resource0", &st, 0) == 0 && st.st_size == 4096, "fstatat resource0");
  EXPECT(fstatat(devices, "10000:00:00.0", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode), "fstatat function");
  errno = 0;
  EXPECT(fstatat(devices, "10002:00:00.0", &st, 0) == -1 && errno == ENOENT, "fstatat of an absent function");
  EXPECT(faccessat(devices, "10000:00:00.0/vendor", R_OK, 0) == 0, "faccessat");
  struct statx sx;
  EXPECT(statx(devices, "10000:00:00.0/resource0", 0, STATX_SIZE, &sx) == 0 && sx.stx_size == 4096, "statx");
  char link[4096] = {0}, want[4096];
  snprintf(want, sizeof want, "%s/pci/devices/10000:00:00.0", getenv("RPCIE_MOUNT"));
  EXPECT(
      readlinkat(devices, "10000:00:00.0", link, sizeof link - 1) == (ssize_t)strlen(want) && strcmp(link, want) == 0,
      "readlinkat: '%s'", link);
  DIR* dir = fdopendir(dup(devices));
  EXPECT(dir != NULL, "fdopendir");
  int seen = 0;
  for (struct dirent* e; (e = readdir(dir)) != NULL;) seen += strncmp(e->d_name, "1000", 4) == 0;
  EXPECT(seen == 2, "fdopendir listing has %d rpcie functions", seen);
  closedir(dir);
}

static void old_stat(void) {
  typedef int (*xstat_fn)(int, const char*, struct stat*);
  typedef int (*fxstatat_fn)(int, int, const char*, struct stat*, int);
  xstat_fn xstat, lxstat;
  fxstatat_fn fxstatat;
  *(void**)&xstat = dlsym(RTLD_DEFAULT, "__xstat"); /* POSIX's way to a function pointer */
  *(void**)&lxstat = dlsym(RTLD_DEFAULT, "__lxstat");
  *(void**)&fxstatat = dlsym(RTLD_DEFAULT, "__fxstatat");
  EXPECT(xstat && lxstat && fxstatat, "no __xstat family in this libc");
  struct stat st;
  EXPECT(xstat(1, DEVICES "/10000:00:00.0/resource0", &st) == 0 && st.st_size == 4096, "__xstat");
  EXPECT(lxstat(1, DEVICES "/10000:00:00.0", &st) == 0 && S_ISDIR(st.st_mode), "__lxstat");
  EXPECT(fxstatat(1, AT_FDCWD, DEVICES "/10000:00:00.0/vendor", &st, 0) == 0 && st.st_size == 7, "__fxstatat");
}

int main(void) {
  scans();
  int devices = open(DEVICES, O_RDONLY | O_DIRECTORY), pci = open("/sys/bus/pci", O_RDONLY | O_DIRECTORY);
  EXPECT(devices >= 0 && pci >= 0, "open " DEVICES);
  relative(devices, pci);
  old_stat();
  EXPECT(chdir(DEVICES) == 0, "chdir " DEVICES);
  vendor_read(AT_FDCWD, "10000:00:00.0/vendor");
  EXPECT(chdir("10000:00:00.0") == 0, "chdir to the function");
  vendor_read(AT_FDCWD, "vendor");
  puts("paths: ok");
  return 0;
}
