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
 *   "s" id flags command cwd stdout stderr uid gid argc arg... envc env...   start a task
 *   "k" id signal                                                   signal a task's group
 * flags: 1 = the output files exist and are empty (opened for appending, not truncated);
 *        2 = contained: the task runs in a PID namespace of its own, as uid and gid (-1: the
 *            launcher's own), with no new privileges (see start_contained).
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
#include <grp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* far above any real request (Linux caps arguments plus environment at a few MB) */
#define MAX_FRAME (64u * 1024u * 1024u)

struct task {
	char id[24];
	pid_t pid;
	/* contained tasks: the slot their init writes the task's wait status to; else -1 */
	int slot;
};

/*
 * A contained task's wait status, written by the init of its namespace (a process this launcher
 * forked, which shares this memory) before it exits: the init's own status says nothing of how
 * the task ended, and an init cannot die by a signal of its own choosing.
 */
struct slot {
	volatile int written;
	volatile int status;
};

#define SLOTS 8192
static struct slot *slots;
static int free_slots[SLOTS];
static int free_count;

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

static void add_task(const char *id, pid_t pid, int slot)
{
	if (task_count == task_cap) {
		task_cap = task_cap ? task_cap * 2 : 64;
		tasks = realloc(tasks, task_cap * sizeof *tasks);
		if (!tasks)
			die("realloc");
	}
	snprintf(tasks[task_count].id, sizeof tasks[task_count].id, "%s", id);
	tasks[task_count].pid = pid;
	tasks[task_count].slot = slot;
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

/* A contained task is signalled through its init, which passes the signal to every process of
 * its namespace once (SIGKILL kills the init, and the kernel then kills the rest). */
static void signal_task(const struct task *t, int sig)
{
	if (t->slot >= 0)
		kill(t->pid, sig);
	else
		signal_group(t->pid, sig);
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

/* How a task is to be started: the fields of an "s" frame, parsed. */
struct request {
	int flags;
	const char *cwd, *out, *err;
	long uid, gid;
	char **args, **env;
	char path[4096];
};

/* The signals a contained task's init passes on to every process of its namespace. */
static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void ignore_signal(int sig)
{
	(void)sig;
}

/* Sends an errno down the error pipe and exits: the launcher reports the task as never started. */
static void fail_start(int errfd, int error)
{
	while (write(errfd, &error, sizeof error) < 0 && errno == EINTR)
		;
	_exit(127);
}

/*
 * In the task's own process, before its exec: default signal dispositions and an empty mask,
 * stdin /dev/null, stdout and stderr in their files (opened while still privileged: they are the
 * agent's, in a directory that is the task's), the task's directory, then the task's identity
 * and no new privileges (a setuid program it runs gains nothing).
 */
static void exec_task(struct request *r, int errfd)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int mode = O_WRONLY | O_CREAT | O_NOFOLLOW | ((r->flags & 1) ? O_APPEND : O_TRUNC);
	int in = open("/dev/null", O_RDONLY);
	int out = open(r->out, mode, 0644);
	int err = strcmp(r->out, r->err) == 0 ? dup(out) : open(r->err, mode, 0644);
	if (in < 0 || out < 0 || err < 0)
		fail_start(errfd, errno);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		fail_start(errfd, errno);
	if (in > 2)
		close(in);
	if (out > 2)
		close(out);
	if (err > 2)
		close(err);
	if (chdir(r->cwd) != 0)
		fail_start(errfd, errno);
	if (r->gid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)r->gid) != 0))
		fail_start(errfd, errno);
	if (r->uid >= 0 && setuid((uid_t)r->uid) != 0)
		fail_start(errfd, errno);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fail_start(errfd, errno);
	execve(r->path, r->args, r->env);
	fail_start(errfd, errno);
}

/*
 * The init of a contained task's PID namespace: starts the task, passes the signals it is sent on
 * to every process of the namespace, reaps what is orphaned there, and once the task ends writes
 * its wait status to the slot and exits, whereupon the kernel kills whatever the task left
 * running (a `setsid` daemon included). It dies with the launcher (PR_SET_PDEATHSIG).
 */
static void run_init(struct request *r, int errfd, int slot)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setsid();
	sigset_t waited;
	sigemptyset(&waited);
	sigaddset(&waited, SIGCHLD);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = ignore_signal;
	/* an init receives only the signals it handles: each gets a handler, and is waited for */
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++) {
		sigaction(forwarded[i], &sa, NULL);
		sigaddset(&waited, forwarded[i]);
	}
	sigaction(SIGCHLD, &sa, NULL);
	sigprocmask(SIG_SETMASK, &waited, NULL);
	/* vfork: nothing copied (a quarter of a contained launch's CPU with fork); the init is
	 * suspended until the task has exec'd, and exec_task touches nothing of its memory but errno
	 * on the way to execve or _exit */
	pid_t task = vfork();
	if (task == 0)
		exec_task(r, errfd);
	if (task < 0)
		fail_start(errfd, errno);
	/* nothing of the launcher's stays open here */
	if (syscall(SYS_close_range, 0, ~0U, 0) != 0)
		for (int fd = 0; fd < 1024; fd++)
			close(fd);
	for (;;) {
		int sig = sigwaitinfo(&waited, NULL);
		if (sig == SIGCHLD) {
			int status;
			pid_t pid;
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				if (pid == task) {
					slots[slot].status = status;
					__sync_synchronize();
					slots[slot].written = 1;
					_exit(0);
				}
		} else if (sig > 0) {
			kill(-1, sig);
		}
	}
}

/*
 * Starts a contained task: an init of a new PID namespace (forked: this process is small), which
 * forks the task. The launcher waits on a close-on-exec pipe until the task has exec'd or failed
 * to, as posix_spawn does, so that "never started" is still told apart from "started".
 */
static int start_contained(struct request *r, pid_t *pid, int *slot_out)
{
	if (free_count == 0)
		return EAGAIN;
	int slot = free_slots[--free_count];
	slots[slot].written = 0;
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		free_slots[free_count++] = slot;
		return errno;
	}
	pid_t child = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
	if (child == 0) {
		close(pipefd[0]);
		run_init(r, pipefd[1], slot);
	}
	int rc = child < 0 ? errno : 0;
	close(pipefd[1]);
	if (rc == 0) {
		int error = 0;
		ssize_t n;
		while ((n = read(pipefd[0], &error, sizeof error)) < 0 && errno == EINTR)
			;
		if (n == (ssize_t)sizeof error) {
			/* the init exits at once: reaped here, so its slot is not reused under it */
			rc = error;
			while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
				;
		}
	}
	close(pipefd[0]);
	if (rc != 0) {
		free_slots[free_count++] = slot;
		return rc;
	}
	*pid = child;
	*slot_out = slot;
	return 0;
}

/* Starts a task with posix_spawn, in a session of its own, as the launcher's own user. */
static int start_spawned(struct request *r, pid_t *pid)
{
	int mode = O_WRONLY | O_CREAT | ((r->flags & 1) ? O_APPEND : O_TRUNC);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, r->out, mode, 0644);
	if (strcmp(r->out, r->err) == 0)
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, r->err, mode, 0644);
	posix_spawn_file_actions_addchdir_np(&fa, r->cwd);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	int rc = posix_spawn(pid, r->path, &fa, &attr, r->args, r->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return rc;
}

/* Starts a task from the fields of an "s" frame; answers the errno when it cannot. */
static int start(char **f, size_t nf, pid_t *pid, int *slot)
{
	/* s id flags command cwd stdout stderr uid gid argc ... */
	if (nf < 10)
		return EINVAL;
	struct request r;
	r.flags = atoi(f[2]);
	const char *command = f[3];
	r.cwd = f[4];
	r.out = f[5];
	r.err = f[6];
	r.uid = strtol(f[7], NULL, 10);
	r.gid = strtol(f[8], NULL, 10);
	size_t argc = strtoul(f[9], NULL, 10);
	if (argc > nf || 10 + argc + 1 > nf)
		return EINVAL;
	char **argv = f + 10;
	size_t envc = strtoul(f[10 + argc], NULL, 10);
	if (10 + argc + 1 + envc != nf)
		return EINVAL;
	char **envp = f + 10 + argc + 1;
	/* the task's argv[0] is the command as given, as Node's spawn does */
	r.args = calloc(argc + 2, sizeof *r.args);
	r.env = calloc(envc + 1, sizeof *r.env);
	if (!r.args || !r.env) {
		free(r.args);
		free(r.env);
		return ENOMEM;
	}
	r.args[0] = (char *)command;
	memcpy(r.args + 1, argv, argc * sizeof *r.args);
	memcpy(r.env, envp, envc * sizeof *r.env);

	*slot = -1;
	int rc = resolve(command, r.cwd, r.env, r.path, sizeof r.path);
	if (rc == 0)
		rc = (r.flags & 2) ? start_contained(&r, pid, slot) : start_spawned(&r, pid);
	free(r.args);
	free(r.env);
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
		int slot;
		int rc = start(f, nf, &pid, &slot);
		if (rc == 0) {
			add_task(f[1], pid, slot);
			reply("p %s %d\n", f[1], (int)pid);
		} else {
			reply("f %s %d\n", f[1], rc);
		}
	} else if (strcmp(f[0], "k") == 0 && nf == 3) {
		struct task *t = find_task(f[1]);
		if (t)
			signal_task(t, atoi(f[2]));
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
			signal_task(&tasks[i], SIGTERM);
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
			int slot = tasks[i].slot;
			if (slot >= 0) {
				__sync_synchronize();
				if (slots[slot].written)
					status = slots[slot].status;
				free_slots[free_count++] = slot;
			}
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
	slots = mmap(NULL, SLOTS * sizeof *slots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (slots == MAP_FAILED)
		die("mmap");
	for (int i = SLOTS - 1; i >= 0; i--)
		free_slots[free_count++] = i;
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
