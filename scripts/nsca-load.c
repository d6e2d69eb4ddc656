/*
 * nsca-load: a second NSCA load generator, in C, so that the daemons are
 * not measured with nsca-bench (Go) alone. It plays CONNS send_nsca clients,
 * one thread each: connect, read the 132-byte init packet, open and key
 * libmcrypt as send_nsca's encrypt_init does, then for each of K checks
 * build the 4304-byte v3 packet (random filling, fields, CRC32), encrypt it
 * one byte per mcrypt_generic call as send_nsca's encrypt_buffer does, and
 * write it; close, and again until SECONDS have passed. The checks carry
 * nsca-bench's ids and contents (bench id=N), so `nsca-bench --exec-client`
 * reads the command file and matches every line. The last line printed is
 * "sent N failed F connections C". With RATE, check n is sent no sooner
 * than n/RATE seconds after the start (RATE checks a second in all).
 *
 *   gcc -O2 -o nsca-load scripts/nsca-load.c -lmcrypt -lpthread
 *   nsca-load HOST PORT ALGORITHM|xor PASSWORD CONNS K SECONDS [RATE]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <mutils/mcrypt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define IV_SIZE 128
#define INIT_SIZE (IV_SIZE + 4)
#define PKT_SIZE 4304
#define OFF_CRC 4
#define OFF_TS 8
#define OFF_RC 12
#define OFF_HOST 14
#define HOST_LEN 64
#define OFF_SVC 78
#define SVC_LEN 128
#define OFF_OUT 206
#define OUT_LEN 4096
#define NOISE (1 << 20)

static const char *alg, *password;
static struct sockaddr_in addr;
static int k;
static double start_at, end_at, rate;
static atomic_ullong next_id, sent, failed, conns;
static unsigned char noise[NOISE];
static uint32_t crc_table[256];

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void crc_init(void) {
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int j = 0; j < 8; j++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32(const unsigned char *p, size_t n) {
	uint32_t c = 0xFFFFFFFFu;
	while (n--)
		c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* build fills pkt as send_nsca does: random bytes, then the fields. */
static void build(unsigned char *pkt, unsigned long long id, const unsigned char *ts, unsigned *seed) {
	size_t off = (size_t)rand_r(seed) % (NOISE - PKT_SIZE);
	memcpy(pkt, noise + off, PKT_SIZE);
	put16(pkt, 3);
	put32(pkt + OFF_CRC, 0);
	memcpy(pkt + OFF_TS, ts, 4);
	put16(pkt + OFF_RC, (uint16_t)(id % 4));
	strncpy((char *)pkt + OFF_HOST, "bench-host", HOST_LEN - 1);
	pkt[OFF_HOST + HOST_LEN - 1] = 0;
	strncpy((char *)pkt + OFF_SVC, "bench-svc", SVC_LEN - 1);
	pkt[OFF_SVC + SVC_LEN - 1] = 0;
	snprintf((char *)pkt + OFF_OUT, OUT_LEN, "bench id=%llu OK - nsca-bench|t=1;2;3", id);
	put32(pkt + OFF_CRC, crc32(pkt, PKT_SIZE));
}

static int read_full(int fd, unsigned char *b, size_t n) {
	while (n > 0) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= r;
	}
	return 0;
}

static int write_full(int fd, const unsigned char *b, size_t n) {
	while (n > 0) {
		ssize_t r = write(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= r;
	}
	return 0;
}

/* one_conn sends the checks first..first+count-1 on one connection. */
static void one_conn(unsigned long long first, unsigned long long count, unsigned *seed) {
	unsigned char init[INIT_SIZE], pkt[PKT_SIZE];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	/* send_nsca's default timeout is 10 s; a server that never answers must
	 * not hang the run. */
	struct timeval tv = {10, 0};
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || read_full(fd, init, INIT_SIZE) < 0) {
		atomic_fetch_add(&failed, 1);
		if (fd >= 0)
			close(fd);
		usleep(10000);
		return;
	}
	atomic_fetch_add(&conns, 1);
	MCRYPT td = MCRYPT_FAILED;
	if (strcmp(alg, "xor") != 0) {
		/* send_nsca's encrypt_init: the password zero-padded or truncated to
		 * the key size, the IV's first iv_size bytes. */
		td = mcrypt_module_open((char *)alg, NULL, "cfb", NULL);
		if (td == MCRYPT_FAILED) {
			fprintf(stderr, "nsca-load: mcrypt_module_open %s failed\n", alg);
			exit(1);
		}
		int ks = mcrypt_enc_get_key_size(td), ivs = mcrypt_enc_get_iv_size(td);
		char key[256] = {0};
		unsigned char iv[IV_SIZE];
		strncpy(key, password, ks < (int)sizeof key ? ks : (int)sizeof key);
		memcpy(iv, init, ivs <= IV_SIZE ? ivs : IV_SIZE);
		if (mcrypt_generic_init(td, key, ks, iv) < 0) {
			fprintf(stderr, "nsca-load: mcrypt_generic_init failed\n");
			exit(1);
		}
	}
	size_t plen = strlen(password);
	for (unsigned long long id = first; id < first + count && now() < end_at; id++) {
		if (rate > 0) {
			double at = start_at + id / rate, d = at - now();
			if (at >= end_at)
				break;
			if (d > 0)
				usleep((useconds_t)(d * 1e6));
		}
		build(pkt, id, init + IV_SIZE, seed);
		if (td != MCRYPT_FAILED) {
			for (int i = 0; i < PKT_SIZE; i++)
				mcrypt_generic(td, pkt + i, 1);
		} else {
			for (int i = 0; i < PKT_SIZE; i++) {
				pkt[i] ^= init[i % IV_SIZE];
				if (plen)
					pkt[i] ^= password[i % plen];
			}
		}
		if (write_full(fd, pkt, PKT_SIZE) < 0) {
			atomic_fetch_add(&failed, 1);
			break;
		}
		atomic_fetch_add(&sent, 1);
	}
	if (td != MCRYPT_FAILED) {
		mcrypt_generic_deinit(td);
		mcrypt_module_close(td);
	}
	close(fd);
}

static void *client(void *arg) {
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
	while (now() < end_at) {
		unsigned long long first = atomic_fetch_add(&next_id, (unsigned long long)k);
		one_conn(first, k, &seed);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 8 && argc != 9) {
		fprintf(stderr, "usage: nsca-load HOST PORT ALGORITHM|xor PASSWORD CONNS K SECONDS [RATE]\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
		fprintf(stderr, "nsca-load: %s: not an IPv4 address\n", argv[1]);
		return 2;
	}
	alg = argv[3];
	password = argv[4];
	int n = atoi(argv[5]);
	k = atoi(argv[6]);
	double secs = atof(argv[7]);
	rate = argc == 9 ? atof(argv[8]) : 0;
	if (n < 1 || k < 1 || secs <= 0) {
		fprintf(stderr, "nsca-load: CONNS, K and SECONDS must be positive\n");
		return 2;
	}
	crc_init();
	unsigned s = (unsigned)time(NULL);
	for (int i = 0; i < NOISE; i++)
		noise[i] = rand_r(&s);
	start_at = now();
	end_at = start_at + secs;
	pthread_t *t = calloc(n, sizeof *t);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, client, (void *)(uintptr_t)(i + 1)) != 0) {
			perror("nsca-load: pthread_create");
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("sent %llu failed %llu connections %llu\n", (unsigned long long)sent, (unsigned long long)failed,
	       (unsigned long long)conns);
	return 0;
}
