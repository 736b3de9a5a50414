/*
 * The driver that runs the code of an object from `propjet::lower::object::emit` on another
 * target (aarch64 under qemu-user in tests/aarch64.rs). It knows nothing of the game: the object
 * says how many slots a value array has and which chunks make up each entry.
 *
 *   harness describe
 *     prints "slots N", then one line per entry and width, "entry E lanes L chunks K", with
 *     K = -1 when the object has no code of that width.
 *   harness run INPUT OUTPUT
 *     INPUT is a sequence of records, each a 32-bit entry index (Entry::ALL order), a 32-bit
 *     lane count (64 or 128) and the value array: N lane values of 8 or 16 bytes, all in the
 *     target's byte order. For each record the harness sets the constant slots, runs the entry's
 *     chunks in order and appends the resulting array to OUTPUT.
 *
 * Exit status 0 on success, 1 with a message on stderr otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*propjet_chunk)(uint64_t *values);

extern const uint64_t propjet_num_slots;
extern const propjet_chunk *const propjet_entries[10];

static int fail(const char *what) {
    fprintf(stderr, "harness: %s\n", what);
    return 1;
}

static long count_chunks(const propjet_chunk *list) {
    long n = 0;
    if (list == NULL) {
        return -1;
    }
    while (list[n] != NULL) {
        n++;
    }
    return n;
}

static int describe(void) {
    printf("slots %llu\n", (unsigned long long)propjet_num_slots);
    for (int entry = 0; entry < 5; entry++) {
        for (int wide = 0; wide < 2; wide++) {
            printf("entry %d lanes %d chunks %ld\n", entry, wide ? 128 : 64,
                   count_chunks(propjet_entries[entry * 2 + wide]));
        }
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

static int run(const char *input_path, const char *output_path) {
    FILE *input = fopen(input_path, "rb");
    if (input == NULL) {
        return fail("cannot open the input file");
    }
    FILE *output = fopen(output_path, "wb");
    if (output == NULL) {
        fclose(input);
        return fail("cannot create the output file");
    }
    /* Room for the wider lane values; 16-byte alignment for the 128-lane code's vector loads.
       At least one slot so that the size is never zero. */
    size_t slots = propjet_num_slots > 2 ? (size_t)propjet_num_slots : 2;
    uint64_t *values = aligned_alloc(16, slots * 16);
    if (values == NULL) {
        fclose(input);
        fclose(output);
        return fail("out of memory");
    }
    int status = 0;
    for (;;) {
        uint32_t header[2];
        size_t got = fread(header, sizeof header[0], 2, input);
        if (got == 0 && feof(input)) {
            break;
        }
        if (got != 2) {
            status = fail("a truncated record header");
            break;
        }
        uint32_t entry = header[0], lanes = header[1];
        if (entry >= 5 || (lanes != 64 && lanes != 128)) {
            status = fail("a record header names no entry or width");
            break;
        }
        size_t words = (size_t)propjet_num_slots * (lanes / 64);
        if (fread(values, sizeof values[0], words, input) != words) {
            status = fail("a truncated value array");
            break;
        }
        const propjet_chunk *list = propjet_entries[entry * 2 + (lanes == 128)];
        if (list == NULL) {
            status = fail("the object has no code of that width");
            break;
        }
        /* The constant slots, as the runtime's wrapper sets them: 0 all zeros, 1 all ones. */
        size_t per_slot = lanes / 64;
        memset(values, 0, per_slot * sizeof values[0]);
        memset(values + per_slot, 0xff, per_slot * sizeof values[0]);
        for (size_t k = 0; list[k] != NULL; k++) {
            list[k](values);
        }
        if (fwrite(values, sizeof values[0], words, output) != words) {
            status = fail("cannot write the output file");
            break;
        }
    }
    if (status == 0 && ferror(input)) {
        status = fail("cannot read the input file");
    }
    free(values);
    fclose(input);
    if (fclose(output) != 0 && status == 0) {
        status = fail("cannot write the output file");
    }
    return status;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "describe") == 0) {
        return describe();
    }
    if (argc == 4 && strcmp(argv[1], "run") == 0) {
        return run(argv[2], argv[3]);
    }
    return fail("usage: harness describe | harness run INPUT OUTPUT");
}
