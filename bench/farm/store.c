/* BENCH SCAFFOLDING: the farm bench's local distributor for the ideal (bench/farm.sh), in C so
 * that its own start-up is not counted as the link's (a Python one costs ~20-50 ms).
 *
 * lld runs it as its DTLTO distributor: `store DIR JOBS.json`. For every job it hard-links
 * DIR/names/NAME to the job's output, where NAME is the job's module (its first input) with '/'
 * written as '%' and, for an archive member (a name with '('), lld's ".TASK.PID.o" suffix
 * removed: the names bench/farm/record.py gave the recorded objects. Nothing compiled, hashed
 * or checked (the bench compares the linked program with the recorded one byte for byte).
 * It reads only what it needs of lld's job file: each job's first "inputs" and "outputs" string.
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *text;

/* The JSON string starting at *p (at its opening quote), unescaped into out; *p moves past. */
static int string(const char **p, char *out, size_t cap) {
    const char *s = *p;
    size_t n = 0;
    if (*s != '"')
        return -1;
    for (s++; *s && *s != '"'; s++) {
        char c = *s;
        if (c == '\\') {
            s++;
            switch (*s) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v;
                if (sscanf(s + 1, "%4x", &v) != 1 || v >= 0x80)
                    return -1;
                c = (char)v;
                s += 4;
                break;
            }
            default: c = *s;
            }
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = c;
    }
    if (*s != '"')
        return -1;
    out[n] = 0;
    *p = s + 1;
    return 0;
}

/* The first string of the array after key (e.g. "\"inputs\":") from p on; NULL when none. */
static const char *first_of(const char *p, const char *key, char *out, size_t cap) {
    p = strstr(p, key);
    if (!p)
        return NULL;
    p += strlen(key);
    while (isspace((unsigned char)*p) || *p == '[')
        p++;
    return string(&p, out, cap) == 0 ? p : NULL;
}

static void name_of(const char *module, char *out) {
    strcpy(out, module);
    if (strchr(out, '(')) { /* drop ".TASK.PID.o" */
        for (int i = 0; i < 3; i++) {
            char *dot = strrchr(out, '.');
            if (dot)
                *dot = 0;
        }
    }
    for (char *c = out; *c; c++)
        if (*c == '/')
            *c = '%';
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: store DIR JOBS.json\n");
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return perror(argv[2]), 1;
    text = malloc(st.st_size + 1);
    if (read(fd, text, st.st_size) != st.st_size)
        return perror("read"), 1;
    text[st.st_size] = 0;
    const char *p = strstr(text, "\"jobs\":");
    if (!p)
        return fprintf(stderr, "store: no jobs\n"), 1;
    static char module[8192], output[8192], name[8192], path[16384];
    int failed = 0;
    for (;;) {
        const char *q = first_of(p, "\"inputs\":", module, sizeof module);
        if (!q)
            break;
        q = first_of(q, "\"outputs\":", output, sizeof output);
        if (!q)
            return fprintf(stderr, "store: a job without outputs\n"), 1;
        p = q;
        name_of(module, name);
        snprintf(path, sizeof path, "%s/names/%s", argv[1], name);
        if (link(path, output) != 0) {
            perror(path);
            failed = 1;
        }
    }
    return failed;
}
