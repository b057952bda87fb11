/*
 * scale-launcher: starts task processes for the node agent (lib/agent/native-launcher.ts).
 *
 * Node's spawn forks the whole calling process and does a good deal of work around it; this
 * program starts each task with posix_spawn (glibc: clone with CLONE_VM|CLONE_VFORK, no page
 * tables copied) and a few system calls, half the CPU per task (measured in docs/decisions.md,
 * "Launching"). It never runs a shell and never formats user text: commands, arguments and
 * environment arrive as separate NUL-terminated strings and go to posix_spawn as they are.
 *
 * Agent to launcher, on stdin: frames of a 4-byte little-endian length, then that many bytes of
 * NUL-terminated fields:
 *   "s" id flags command cwd stdout stderr argc arg... envc env...   start a task
 *   "k" id signal                                                   signal a task's group
 * flags: 1 = the output files exist and are empty (opened for appending, not truncated).
 * Launcher to agent, on stdout, one line each:
 *   "p id pid"           started
 *   "f id errno"         never started (the errno of the failed exec, open or chdir)
 *   "x id code signal"   ended: the exit code, or -1 and the signal number; the rest of
 *                        the task's process group has been sent SIGKILL
 * When stdin closes (the agent is gone or stopping), every task's process group gets SIGTERM
 * and the launcher exits.
 *
 * Each task leads a new session (so a kill reaches what it starts), with stdin /dev/null, stdout
 * and stderr in the files named, default signal dispositions and an empty signal mask.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* far above any real request (Linux caps arguments plus environment at a few MB) */
#define MAX_FRAME (64u * 1024u * 1024u)

struct task {
	char id[24];
	pid_t pid;
};

static struct task *tasks;
static size_t task_count, task_cap;

static char *in_buf;
static size_t in_len, in_cap;

static char out_buf[65536];
static size_t out_len;

static void die(const char *what)
{
	fprintf(stderr, "scale-launcher: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void flush_out(void)
{
	size_t done = 0;
	while (done < out_len) {
		ssize_t n = write(STDOUT_FILENO, out_buf + done, out_len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* the agent is gone: nobody to report to, stop as on a closed stdin */
			out_len = 0;
			return;
		}
		done += (size_t)n;
	}
	out_len = 0;
}

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...)
{
	va_list ap;
	if (sizeof(out_buf) - out_len < 128)
		flush_out();
	va_start(ap, fmt);
	int n = vsnprintf(out_buf + out_len, sizeof(out_buf) - out_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		out_len += (size_t)n;
}

static void add_task(const char *id, pid_t pid)
{
	if (task_count == task_cap) {
		task_cap = task_cap ? task_cap * 2 : 64;
		tasks = realloc(tasks, task_cap * sizeof *tasks);
		if (!tasks)
			die("realloc");
	}
	snprintf(tasks[task_count].id, sizeof tasks[task_count].id, "%s", id);
	tasks[task_count].pid = pid;
	task_count++;
}

static struct task *find_task(const char *id)
{
	for (size_t i = 0; i < task_count; i++)
		if (strcmp(tasks[i].id, id) == 0)
			return &tasks[i];
	return NULL;
}

static void signal_group(pid_t pid, int sig)
{
	if (kill(-pid, sig) != 0)
		kill(pid, sig);
}

/* The PATH entry of an environment given as "NAME=value" strings, or the usual default. */
static const char *path_of(char **env)
{
	for (; *env; env++)
		if (strncmp(*env, "PATH=", 5) == 0)
			return *env + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

/*
 * Looks a command without a slash up in the task's PATH, as execvp would with the task's
 * environment (relative entries are taken from the task's directory). Answers 0 with the path in
 * `found`, or the errno to report.
 */
static int resolve(const char *command, const char *cwd, char **env, char *found, size_t size)
{
	if (strchr(command, '/')) {
		if ((size_t)snprintf(found, size, "%s", command) >= size)
			return ENAMETOOLONG;
		return 0;
	}
	if (*command == '\0')
		return ENOENT;
	int denied = 0;
	const char *p = path_of(env);
	for (;;) {
		const char *end = strchrnul(p, ':');
		int len = (int)(end - p);
		int n;
		if (len == 0)
			n = snprintf(found, size, "%s/%s", cwd, command);
		else if (*p == '/')
			n = snprintf(found, size, "%.*s/%s", len, p, command);
		else
			n = snprintf(found, size, "%s/%.*s/%s", cwd, len, p, command);
		if (n > 0 && (size_t)n < size) {
			struct stat st;
			if (stat(found, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(found, X_OK) == 0)
					return 0;
				denied = 1;
			}
		}
		if (*end == '\0')
			break;
		p = end + 1;
	}
	return denied ? EACCES : ENOENT;
}

/* Starts a task from the fields of an "s" frame; answers the errno when it cannot. */
static int start(char **f, size_t nf, pid_t *pid)
{
	/* s id flags command cwd stdout stderr argc ... */
	if (nf < 8)
		return EINVAL;
	int flags = atoi(f[2]);
	const char *command = f[3], *cwd = f[4], *out = f[5], *err = f[6];
	size_t argc = strtoul(f[7], NULL, 10);
	if (argc > nf || 8 + argc + 1 > nf)
		return EINVAL;
	char **argv = f + 8;
	size_t envc = strtoul(f[8 + argc], NULL, 10);
	if (8 + argc + 1 + envc != nf)
		return EINVAL;
	char **envp = f + 8 + argc + 1;
	/* the task's argv[0] is the command as given, as Node's spawn does */
	char **args = calloc(argc + 2, sizeof *args);
	char **env = calloc(envc + 1, sizeof *env);
	if (!args || !env) {
		free(args);
		free(env);
		return ENOMEM;
	}
	args[0] = (char *)command;
	memcpy(args + 1, argv, argc * sizeof *args);
	memcpy(env, envp, envc * sizeof *env);

	char path[4096];
	int rc = resolve(command, cwd, env, path, sizeof path);
	if (rc == 0) {
		int mode = O_WRONLY | O_CREAT | ((flags & 1) ? O_APPEND : O_TRUNC);
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t attr;
		sigset_t none, all;
		sigemptyset(&none);
		sigfillset(&all);
		sigdelset(&all, SIGKILL);
		sigdelset(&all, SIGSTOP);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 1, out, mode, 0644);
		if (strcmp(out, err) == 0)
			posix_spawn_file_actions_adddup2(&fa, 1, 2);
		else
			posix_spawn_file_actions_addopen(&fa, 2, err, mode, 0644);
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
		posix_spawnattr_init(&attr);
		posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
							POSIX_SPAWN_SETSIGDEF);
		posix_spawnattr_setsigmask(&attr, &none);
		posix_spawnattr_setsigdefault(&attr, &all);
		rc = posix_spawn(pid, path, &fa, &attr, args, env);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&attr);
	}
	free(args);
	free(env);
	return rc;
}

/* Splits a frame's payload into its NUL-terminated fields (in place). */
static char **fields(char *p, size_t len, size_t *count)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (p[i] == '\0')
			n++;
	if (len == 0 || p[len - 1] != '\0')
		return NULL;
	char **f = malloc((n ? n : 1) * sizeof *f);
	if (!f)
		die("malloc");
	size_t k = 0;
	for (char *s = p; s < p + len; s += strlen(s) + 1)
		f[k++] = s;
	*count = n;
	return f;
}

static void handle_frame(char *p, size_t len)
{
	size_t nf;
	char **f = fields(p, len, &nf);
	if (!f || nf < 2 || strlen(f[1]) >= sizeof tasks->id) {
		fprintf(stderr, "scale-launcher: a malformed request was ignored\n");
		free(f);
		return;
	}
	if (strcmp(f[0], "s") == 0) {
		pid_t pid;
		int rc = start(f, nf, &pid);
		if (rc == 0) {
			add_task(f[1], pid);
			reply("p %s %d\n", f[1], (int)pid);
		} else {
			reply("f %s %d\n", f[1], rc);
		}
	} else if (strcmp(f[0], "k") == 0 && nf == 3) {
		struct task *t = find_task(f[1]);
		if (t)
			signal_group(t->pid, atoi(f[2]));
	} else {
		fprintf(stderr, "scale-launcher: an unknown request was ignored\n");
	}
	free(f);
}

static void read_requests(void)
{
	if (in_cap - in_len < 65536) {
		in_cap = in_cap ? in_cap * 2 : 262144;
		in_buf = realloc(in_buf, in_cap);
		if (!in_buf)
			die("realloc");
	}
	ssize_t n = read(STDIN_FILENO, in_buf + in_len, in_cap - in_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		/* the agent is gone or stopping: its tasks go too */
		for (size_t i = 0; i < task_count; i++)
			signal_group(tasks[i].pid, SIGTERM);
		flush_out();
		exit(0);
	}
	in_len += (size_t)n;
	size_t at = 0;
	while (in_len - at >= 4) {
		const unsigned char *h = (const unsigned char *)in_buf + at;
		uint32_t len = h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24;
		if (len > MAX_FRAME) {
			fprintf(stderr, "scale-launcher: a request of %u bytes is too large\n", len);
			exit(2);
		}
		if (in_len - at - 4 < len) {
			if (in_cap < len + 4) {
				in_cap = len + 4;
				memmove(in_buf, in_buf + at, in_len - at);
				in_len -= at;
				at = 0;
				in_buf = realloc(in_buf, in_cap);
				if (!in_buf)
					die("realloc");
			}
			break;
		}
		handle_frame(in_buf + at + 4, len);
		at += 4 + len;
	}
	memmove(in_buf, in_buf + at, in_len - at);
	in_len -= at;
}

static void reap(int sfd)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof si) == sizeof si)
		;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < task_count; i++) {
			if (tasks[i].pid != pid)
				continue;
			if (WIFSIGNALED(status))
				reply("x %s -1 %d\n", tasks[i].id, WTERMSIG(status));
			else
				reply("x %s %d 0\n", tasks[i].id, WEXITSTATUS(status));
			/* what the task left running in its group goes with it, at once (no other
			 * process can have taken the group's number while its leader was unreaped) */
			kill(-pid, SIGKILL);
			tasks[i] = tasks[--task_count];
			break;
		}
	}
}

int main(void)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0)
		die("sigprocmask");
	int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd");
	/* a terminal's Ctrl-C reaches the agent, which decides; a closed stdout is seen in write */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	fcntl(STDIN_FILENO, F_SETFD, FD_CLOEXEC);
	fcntl(STDOUT_FILENO, F_SETFD, FD_CLOEXEC);
	struct pollfd fds[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
				 { .fd = sfd, .events = POLLIN } };
	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (fds[0].revents)
			read_requests();
		if (fds[1].revents)
			reap(sfd);
		flush_out();
	}
}
