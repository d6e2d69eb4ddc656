/*
 * LD_PRELOAD shim for the scale-out test: binds every IPv4 socket that
 * connects to the source address in NSCA_TEST_SOURCE_ADDRESS (a 127.0.0.x
 * address) first, so the unmodified send_nsca can play clients on several
 * machines. send_nsca has no option for its source address.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real_connect)(int, const struct sockaddr *, socklen_t);
	const char *source = getenv("NSCA_TEST_SOURCE_ADDRESS");

	if (!real_connect)
		real_connect = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	if (source && addr && addr->sa_family == AF_INET) {
		struct sockaddr_in sin;
		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, source, &sin.sin_addr) == 1)
			bind(fd, (struct sockaddr *)&sin, sizeof sin);
	}
	return real_connect(fd, addr, len);
}
