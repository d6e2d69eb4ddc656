/*
 * ng-psk-client: an nsca-ng client for the benchmarks of issue 34.
 *
 *   ng-psk-client [-2] idle HOST PORT IDENTITY PASSWORD N
 *   ng-psk-client [-2] time HOST PORT IDENTITY PASSWORD N
 *
 * idle opens N TLS-PSK sessions one after the other (handshake, MOIN, its
 * answer), prints "open N", waits for a line on stdin, closes them all
 * (QUIT, close_notify, close), prints "closed" and exits: what a burst of
 * sessions costs the server in memory, and what it gives back.
 *
 * time runs N sessions one after the other as the real send_nsca does
 * (handshake, MOIN, one PUSH of a check result, QUIT, close_notify), with
 * Nagle's algorithm left on as send_nsca leaves it, and prints the median,
 * mean and 90th percentile of a session in µs: the server's latency
 * without send_nsca's start-up in the figure.
 *
 * -2 keeps to TLS 1.2; else TLS 1.3 is negotiated. One thread, blocking
 * sockets. Build: cc -O2 -o ng-psk-client ng-psk-client.c -lssl -lcrypto
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *identity, *password;

static unsigned int psk_cb(SSL *ssl, const char *hint, char *id, unsigned int max_id, unsigned char *psk, unsigned int max_psk) {
	size_t n = strlen(password);
	(void)ssl;
	(void)hint;
	if (strlen(identity) + 1 > max_id || n > max_psk) {
		return 0;
	}
	strcpy(id, identity);
	memcpy(psk, password, n);
	return (unsigned int)n;
}

/* line reads one answer line into buf; 0 on success. */
static int line(SSL *ssl, char *buf, int len) {
	int got = 0;
	while (got < len - 1) {
		int n = SSL_read(ssl, buf + got, 1);
		if (n <= 0) {
			return -1;
		}
		if (buf[got++] == '\n') {
			break;
		}
	}
	buf[got] = '\0';
	return 0;
}

/* request writes req and checks that the answer starts with want. */
static int request(SSL *ssl, const char *req, const char *want) {
	char buf[256];
	if (SSL_write(ssl, req, (int)strlen(req)) <= 0 || line(ssl, buf, sizeof buf) != 0) {
		fprintf(stderr, "ng-psk-client: no answer to %s", req);
		return -1;
	}
	if (strncmp(buf, want, strlen(want)) != 0) {
		fprintf(stderr, "ng-psk-client: %s answered %s", req, buf);
		return -1;
	}
	return 0;
}

static SSL *session(SSL_CTX *ctx, struct sockaddr_in *sa, int i, int nodelay) {
	char buf[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	SSL *ssl;
	if (fd < 0 || connect(fd, (struct sockaddr *)sa, sizeof *sa) != 0) {
		perror("ng-psk-client: connect");
		return NULL;
	}
	if (nodelay) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	if (SSL_connect(ssl) != 1) {
		ERR_print_errors_fp(stderr);
		return NULL;
	}
	snprintf(buf, sizeof buf, "MOIN 1 bench%06d\r\n", i);
	return request(ssl, buf, "MOIN 1") == 0 ? ssl : NULL;
}

static void end(SSL *ssl) {
	char buf[64];
	SSL_write(ssl, "QUIT\r\n", 6);
	line(ssl, buf, sizeof buf);
	SSL_shutdown(ssl);
	close(SSL_get_fd(ssl));
	SSL_free(ssl);
}

static int idle(SSL_CTX *ctx, struct sockaddr_in *sa, int n) {
	SSL **s = calloc((size_t)n, sizeof *s);
	char buf[64];
	int i;
	for (i = 0; i < n; i++) {
		/* No Nagle: only the sessions' memory is measured. */
		if ((s[i] = session(ctx, sa, i, 1)) == NULL) {
			return 1;
		}
	}
	printf("open %d\n", n);
	fflush(stdout);
	if (fgets(buf, sizeof buf, stdin) == NULL) {
		/* EOF: close all the same. */
	}
	for (i = 0; i < n; i++) {
		end(s[i]);
	}
	printf("closed\n");
	return 0;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int timed(SSL_CTX *ctx, struct sockaddr_in *sa, int n) {
	const char *cmd = "[1700000000] PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;ok\n";
	double *us = calloc((size_t)n, sizeof *us), sum = 0;
	char push[64];
	int i;
	snprintf(push, sizeof push, "PUSH %zu\r\n", strlen(cmd));
	for (i = 0; i < n; i++) {
		struct timespec t0, t1;
		SSL *ssl;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if ((ssl = session(ctx, sa, i, 0)) == NULL || request(ssl, push, "OKAY") != 0 || request(ssl, cmd, "OKAY") != 0) {
			return 1;
		}
		end(ssl);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		us[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
		sum += us[i];
	}
	qsort(us, (size_t)n, sizeof *us, cmp);
	printf("%.0f %.0f %.0f\n", us[(n - 1) / 2], sum / n, us[(n * 9) / 10 - (n >= 10)]);
	return 0;
}

int main(int argc, char **argv) {
	int tls12 = argc > 1 && strcmp(argv[1], "-2") == 0;
	struct sockaddr_in sa = {0};
	SSL_CTX *ctx;
	argv += tls12;
	argc -= tls12;
	if (argc != 7 || (strcmp(argv[1], "idle") != 0 && strcmp(argv[1], "time") != 0) || atoi(argv[6]) < 1) {
		fprintf(stderr, "usage: ng-psk-client [-2] idle|time HOST PORT IDENTITY PASSWORD N\n");
		return 2;
	}
	identity = argv[4];
	password = argv[5];
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[3]));
	inet_pton(AF_INET, argv[2], &sa.sin_addr);
	ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_psk_client_callback(ctx, psk_cb);
	SSL_CTX_set_cipher_list(ctx, "PSK-AES256-CBC-SHA");
	if (tls12) {
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	}
	if (strcmp(argv[1], "idle") == 0) {
		return idle(ctx, &sa, atoi(argv[6]));
	}
	return timed(ctx, &sa, atoi(argv[6]));
}
