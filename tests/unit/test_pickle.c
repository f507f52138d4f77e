/* The data-only pickle decoder (lib/replay/pickle.c).  Byte strings come from
 * CPython 3.11's pickle.dumps (shown beside each with pickletools offsets)
 * or are built by hand where Python would never emit them; expected values
 * are what pickle.loads returns for the same bytes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/trace.h"

#define LEN(s) (sizeof(s) - 1)

static ms_pickle *decode_ok(const char *data, size_t len)
{
    ms_pickle *p = NULL;
    ms_diag d = {0};
    ms_status st = ms_pickle_decode(data, len, NULL, &p, &d);
    ck_assert_msg(st == MS_OK, "decode failed: %s", d.msg);
    ck_assert_ptr_nonnull(p);
    return p;
}

static ms_status decode_err(const char *data, size_t len, ms_diag *d)
{
    ms_pickle *p = (ms_pickle *)1;
    ms_status st = ms_pickle_decode(data, len, NULL, &p, d);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_ptr_null(p);
    ck_assert_msg(d->msg[0] != '\0', "an error must carry a message");
    return st;
}

static int64_t int_of(const ms_pickle_value *v)
{
    int64_t i = -999;
    ck_assert_int_eq(ms_pickle_as_int(v, &i), MS_OK);
    return i;
}

static const ms_pickle_value *item(const ms_pickle_value *v, size_t i)
{
    const ms_pickle_value *x = NULL;
    ck_assert_int_eq(ms_pickle_item(v, i, &x), MS_OK);
    return x;
}

/* pickle.dumps({'a': [1, 2.5, 'x']}, protocol=4):
 *  0 PROTO 4, 2 FRAME 27, 11 EMPTY_DICT, 12 MEMOIZE, 13 SHORT_BINUNICODE 'a',
 * 16 MEMOIZE, 17 EMPTY_LIST, 18 MEMOIZE, 19 MARK, 20 BININT1 1,
 * 22 BINFLOAT 2.5, 31 SHORT_BINUNICODE 'x', 34 MEMOIZE, 35 APPENDS,
 * 36 SETITEM, 37 STOP. */
static const char dict_p4[] = "\x80\x04\x95\x1b\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x61"
                              "\x94\x5d\x94\x28\x4b\x01\x47\x40\x04\x00\x00\x00\x00\x00\x00\x8c"
                              "\x01\x78\x94\x65\x73\x2e";

START_TEST(dict_of_list_protocol4)
{
    ms_pickle *p = decode_ok(dict_p4, LEN(dict_p4));
    const ms_pickle_value *root = ms_pickle_root(p), *a = NULL, *x;
    ck_assert_int_eq(ms_pickle_kind_of(root), MS_PK_DICT);
    size_t n = 0;
    ck_assert_int_eq(ms_pickle_len(root, &n), MS_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ms_pickle_dict_get(root, "a", &a), MS_OK);
    ck_assert_int_eq(ms_pickle_dict_get(root, "b", &x), MS_ENOENT);
    ck_assert_int_eq(ms_pickle_kind_of(a), MS_PK_LIST);
    ck_assert_int_eq(ms_pickle_len(a, &n), MS_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(int_of(item(a, 0)), 1);
    double f = 0;
    ck_assert_int_eq(ms_pickle_as_float(item(a, 1), &f), MS_OK);
    ck_assert(f == 2.5);
    const char *s = NULL;
    size_t len = 0;
    ck_assert_int_eq(ms_pickle_as_str(item(a, 2), &s, &len), MS_OK);
    ck_assert_str_eq(s, "x");
    ck_assert_uint_eq(len, 1);
    /* Type mismatches are errors, not conversions. */
    ck_assert_int_eq(ms_pickle_as_str(item(a, 0), &s, &len), MS_EINVAL);
    ck_assert_int_eq(ms_pickle_as_int(item(a, 1), &(int64_t){0}), MS_EINVAL);
    ck_assert_int_eq(ms_pickle_item(a, 3, &x), MS_ERANGE);
    ck_assert_int_eq(ms_pickle_dict_get(a, "a", &x), MS_EINVAL);
    ms_pickle_free(p);
}
END_TEST

/* x = [1, 2]; pickle.dumps([x, x], protocol=2): the second element is
 * BINGET 1 of the first, so both are the same object, as in Python. */
START_TEST(memo_shares_objects)
{
    static const char b[] = "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x28\x4b\x01\x4b\x02\x65\x68"
                            "\x01\x65\x2e";
    ms_pickle *p = decode_ok(b, LEN(b));
    const ms_pickle_value *root = ms_pickle_root(p);
    ck_assert_ptr_eq(item(root, 0), item(root, 1));
    ck_assert_int_eq(int_of(item(item(root, 1), 1)), 2);
    ms_pickle_free(p);
}
END_TEST

START_TEST(memo_text_and_long_forms)
{
    /* K 7, PUT 3, POP, GET 3 -> 7 */
    static const char a[] = "\x80\x02K\x07p3\n0g3\n.";
    ms_pickle *p = decode_ok(a, LEN(a));
    ck_assert_int_eq(int_of(ms_pickle_root(p)), 7);
    ms_pickle_free(p);
    /* K 9, LONG_BINPUT 5, LONG_BINGET 5, TUPLE2 -> (9, 9) */
    static const char b[] = "\x80\x02K\x09r\x05\x00\x00\x00j\x05\x00\x00\x00\x86.";
    p = decode_ok(b, LEN(b));
    ck_assert_int_eq(int_of(item(ms_pickle_root(p), 1)), 9);
    ms_pickle_free(p);
    /* MEMOIZE stores at len(memo): K 1 -> memo[0], K 2 -> memo[1]; BINGET 1 -> 2 */
    static const char c[] = "\x80\x04K\x01\x94K\x02\x94h\x01.";
    p = decode_ok(c, LEN(c));
    ck_assert_int_eq(int_of(ms_pickle_root(p)), 2);
    ms_pickle_free(p);
    /* [l] with l appended to itself: a cycle, which the document owns. */
    static const char d[] = "\x80\x02]q\x00h\x00" "a.";
    p = decode_ok(d, LEN(d));
    ck_assert_ptr_eq(item(ms_pickle_root(p), 0), ms_pickle_root(p));
    ms_pickle_free(p);
}
END_TEST

START_TEST(bad_memo_index)
{
    ms_diag d = {0};
    static const char a[] = "\x80\x02h\x07."; /* BINGET 7 at offset 2 */
    ck_assert_int_eq(decode_err(a, LEN(a), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "memo key 7 not found"));
    ck_assert_ptr_nonnull(strstr(d.msg, "opcode BINGET at offset 2"));
    /* PUT needs a value to store. */
    static const char b[] = "\x80\x02q\x00.";
    ck_assert_int_eq(decode_err(b, LEN(b), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "BINPUT at offset 2"));
    /* An index over the limit is refused before anything is allocated. */
    ms_pickle_limits lim;
    ms_pickle_limits_default(&lim);
    lim.max_memo = 100;
    static const char c[] = "\x80\x02Nr\x40\x42\x0f\x00."; /* LONG_BINPUT 1000000 */
    ms_pickle *p = NULL;
    ck_assert_int_eq(ms_pickle_decode(c, LEN(c), &lim, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "LONG_BINPUT at offset 3"));
}
END_TEST

/* pickle.dumps((frozenset([3]), {5}, b'\x00\x01', bytearray(b'z'), 2**64,
 * -2**63, None, True), protocol=5) */
START_TEST(protocol5_kinds)
{
    static const char b[] = "\x80\x05\x95\x36\x00\x00\x00\x00\x00\x00\x00\x28\x28\x4b\x03\x91"
                            "\x94\x8f\x94\x28\x4b\x05\x90\x43\x02\x00\x01\x94\x96\x01\x00\x00"
                            "\x00\x00\x00\x00\x00\x7a\x94\x8a\x09\x00\x00\x00\x00\x00\x00\x00"
                            "\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x4e\x88\x74\x94"
                            "\x2e";
    ms_pickle *p = decode_ok(b, LEN(b));
    const ms_pickle_value *t = ms_pickle_root(p);
    ck_assert_int_eq(ms_pickle_kind_of(t), MS_PK_TUPLE);
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 0)), MS_PK_FROZENSET);
    ck_assert_int_eq(int_of(item(item(t, 0), 0)), 3);
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 1)), MS_PK_SET);
    ck_assert_int_eq(int_of(item(item(t, 1), 0)), 5);
    const uint8_t *bytes;
    size_t n;
    ck_assert_int_eq(ms_pickle_as_bytes(item(t, 2), &bytes, &n), MS_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(bytes[1], 1);
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 3)), MS_PK_BYTEARRAY);
    /* 2**64 is beyond int64: a bigint holding its 9 LONG1 bytes. */
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 4)), MS_PK_BIGINT);
    ck_assert_int_eq(ms_pickle_as_int(item(t, 4), &(int64_t){0}), MS_ERANGE);
    ck_assert_int_eq(ms_pickle_as_bytes(item(t, 4), &bytes, &n), MS_OK);
    ck_assert_uint_eq(n, 9);
    ck_assert_uint_eq(bytes[8], 1);
    ck_assert(int_of(item(t, 5)) == INT64_MIN);
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 6)), MS_PK_NONE);
    bool truth = false;
    ck_assert_int_eq(ms_pickle_as_bool(item(t, 7), &truth), MS_OK);
    ck_assert(truth);
    ck_assert_int_eq(int_of(item(t, 7)), 1); /* a bool is an int */
    ms_pickle_free(p);
}
END_TEST

START_TEST(integer_forms)
{
    /* MARK, BININT -2, BININT2 65535, LONG1 -5 (0xfb), INT -17, INT 01 (True),
     * LONG -5L, LONG1 with 0 bytes (0), TUPLE */
    static const char b[] = "\x80\x02(J\xfe\xff\xff\xffM\xff\xff\x8a\x01\xfbI-17\nI01\nL-5L\n"
                            "\x8a\x00t.";
    ms_pickle *p = decode_ok(b, LEN(b));
    const ms_pickle_value *t = ms_pickle_root(p);
    ck_assert_int_eq(int_of(item(t, 0)), -2);
    ck_assert_int_eq(int_of(item(t, 1)), 65535);
    ck_assert_int_eq(int_of(item(t, 2)), -5);
    ck_assert_int_eq(int_of(item(t, 3)), -17);
    ck_assert_int_eq(ms_pickle_kind_of(item(t, 4)), MS_PK_BOOL);
    ck_assert_int_eq(int_of(item(t, 5)), -5);
    ck_assert_int_eq(int_of(item(t, 6)), 0);
    ms_pickle_free(p);
    /* A text LONG beyond int64 is out of range (documented). */
    ms_diag d = {0};
    static const char c[] = "\x80\x02L99999999999999999999999L\n.";
    ck_assert_int_eq(decode_err(c, LEN(c), &d), MS_ERANGE);
    ck_assert_ptr_nonnull(strstr(d.msg, "LONG at offset 2"));
    /* LONG4 with a negative byte count. */
    static const char e[] = "\x80\x02\x8b\xff\xff\xff\xff.";
    ck_assert_int_eq(decode_err(e, LEN(e), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "LONG4 at offset 2"));
}
END_TEST

START_TEST(text_string_and_float)
{
    /* STRING 'a\x41\n' -> "aA\n"; FLOAT 1.5e3 */
    static const char b[] = "\x80\x02(S'a\\x41\\n'\nF1.5e3\nt.";
    ms_pickle *p = decode_ok(b, LEN(b));
    const char *s;
    size_t n;
    ck_assert_int_eq(ms_pickle_as_str(item(ms_pickle_root(p), 0), &s, &n), MS_OK);
    ck_assert_str_eq(s, "aA\n");
    double f;
    ck_assert_int_eq(ms_pickle_as_float(item(ms_pickle_root(p), 1), &f), MS_OK);
    ck_assert(f == 1500.0);
    ms_pickle_free(p);
    ms_diag d = {0};
    static const char c[] = "\x80\x02Sabc\n."; /* unquoted */
    ck_assert_int_eq(decode_err(c, LEN(c), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "quoted"));
    /* SHORT_BINUNICODE of bytes c3 28: not UTF-8. */
    static const char u[] = "\x80\x04\x8c\x02\xc3\x28.";
    ck_assert_int_eq(decode_err(u, LEN(u), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "UTF-8"));
    ck_assert_ptr_nonnull(strstr(d.msg, "SHORT_BINUNICODE at offset 2"));
}
END_TEST

/* Python dict semantics: 1, True and 1.0 are one key; the first key object
 * stays, the last value wins.  pickle.loads of these bytes gives {1: 'c'}. */
START_TEST(dict_duplicate_keys)
{
    static const char b[] = "\x80\x02(K\x01U\x01" "a\x88U\x01" "bG\x3f\xf0\x00\x00\x00\x00\x00\x00U"
                            "\x01" "cd.";
    ms_pickle *p = decode_ok(b, LEN(b));
    const ms_pickle_value *root = ms_pickle_root(p), *k, *v;
    size_t n;
    ck_assert_int_eq(ms_pickle_len(root, &n), MS_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ms_pickle_dict_item(root, 0, &k, &v), MS_OK);
    ck_assert_int_eq(ms_pickle_kind_of(k), MS_PK_INT);
    const char *s;
    ck_assert_int_eq(ms_pickle_as_str(v, &s, NULL), MS_OK);
    ck_assert_str_eq(s, "c");
    ms_pickle_free(p);
}
END_TEST

/* A dict past the linear-search size uses its hash index: 100 keys
 * 'k0'..'k99' with value i, then 'k42' again with 4242. */
START_TEST(big_dict_lookup)
{
    char buf[4096];
    size_t o = 0;
    memcpy(buf + o, "\x80\x04}(", 4);
    o += 4;
    for (int i = 0; i <= 100; i++) {
        int k = i == 100 ? 42 : i;
        int len = snprintf(buf + o + 2, 8, "k%d", k);
        buf[o] = '\x8c';
        buf[o + 1] = (char)len;
        o += 2 + (size_t)len;
        int val = i == 100 ? 4242 : i;
        buf[o++] = 'M'; /* BININT2 */
        buf[o++] = (char)(val & 0xff);
        buf[o++] = (char)(val >> 8);
    }
    buf[o++] = 'u';
    buf[o++] = '.';
    ms_pickle *p = decode_ok(buf, o);
    const ms_pickle_value *root = ms_pickle_root(p), *v;
    size_t n;
    ck_assert_int_eq(ms_pickle_len(root, &n), MS_OK);
    ck_assert_uint_eq(n, 100);
    ck_assert_int_eq(ms_pickle_dict_get(root, "k42", &v), MS_OK);
    ck_assert_int_eq(int_of(v), 4242);
    ck_assert_int_eq(ms_pickle_dict_get(root, "k99", &v), MS_OK);
    ck_assert_int_eq(int_of(v), 99);
    ck_assert_int_eq(ms_pickle_dict_get(root, "k100", &v), MS_ENOENT);
    ms_pickle_free(p);
}
END_TEST

START_TEST(truncated_everywhere)
{
    /* Every proper prefix of a valid pickle fails cleanly (and ASan/valgrind
     * see no bad access): offset 0 is empty input, every later cut is a
     * truncation. */
    static const char b5[] = "\x80\x05\x95\x36\x00\x00\x00\x00\x00\x00\x00\x28\x28\x4b\x03\x91"
                             "\x94\x8f\x94\x28\x4b\x05\x90\x43\x02\x00\x01\x94\x96\x01\x00\x00"
                             "\x00\x00\x00\x00\x00\x7a\x94\x8a\x09\x00\x00\x00\x00\x00\x00\x00"
                             "\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x4e\x88\x74\x94"
                             "\x2e";
    const char *all[] = {dict_p4, b5};
    const size_t lens[] = {LEN(dict_p4), LEN(b5)};
    for (size_t t = 0; t < 2; t++) {
        for (size_t k = 0; k < lens[t]; k++) {
            /* A heap copy of exactly k bytes, so a read past the end is
             * caught by the sanitizers. */
            char *cut = malloc(k ? k : 1);
            memcpy(cut, all[t], k);
            ms_diag d = {0};
            decode_err(cut, k, &d);
            if (k == 0)
                ck_assert_ptr_nonnull(strstr(d.msg, "the input is empty"));
            else
                ck_assert_msg(strstr(d.msg, "truncated") != NULL, "cut %zu: %s", k, d.msg);
            free(cut);
        }
    }
}
END_TEST

START_TEST(wrong_protocol)
{
    ms_diag d = {0};
    ck_assert_int_eq(decode_err("\x80\x01N.", 4, &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "unsupported pickle protocol 1"));
    ck_assert_ptr_nonnull(strstr(d.msg, "PROTO at offset 0"));
    ck_assert_int_eq(decode_err("\x80\x06N.", 4, &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "protocol 6"));
    /* Protocol 0 has no PROTO opcode at all. */
    ck_assert_int_eq(decode_err("N.", 2, &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "protocol 0 or 1 (no PROTO opcode 0x80 at offset 0)"));
}
END_TEST

/* Input that is no pickle at all is not called an old pickle. */
START_TEST(not_a_pickle)
{
    ms_diag d = {0};
    ck_assert_int_eq(decode_err("", 0, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "not a pickle: the input is empty"));
    static const char json[] = " {\"segments\": [], \"device_traces\": []}";
    ck_assert_int_eq(decode_err(json, LEN(json), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "not a pickle: the input looks like JSON"));
    static const char zip[] = "PK\x03\x04\x14\x00";
    ck_assert_int_eq(decode_err(zip, LEN(zip), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "zip archive"));
    static const char junk[] = "\x13\x37\xc0\xde\x01\x02\x03\x04\x05";
    ck_assert_int_eq(decode_err(junk, LEN(junk), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "with the bytes 13 37 c0 de 01 02 03 04"));
    ck_assert_ptr_null(strstr(d.msg, "protocol"));
}
END_TEST

START_TEST(code_opcodes_refused)
{
    ms_diag d = {0};
    /* pickle.dumps(os.system, protocol=2) starts with GLOBAL 'os system'. */
    static const char g[] = "\x80\x02" "cos\nsystem\nq\x00.";
    ck_assert_int_eq(decode_err(g, LEN(g), &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "opcode GLOBAL at offset 2"));
    /* REDUCE at offset 4, after two NONEs. */
    static const char r[] = "\x80\x02NNR.";
    ck_assert_int_eq(decode_err(r, LEN(r), &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "opcode REDUCE at offset 4"));
    /* Every other code opcode, right after PROTO 4. */
    static const struct {
        char op;
        const char *name;
    } refused[] = {{'\x93', "STACK_GLOBAL"}, {'b', "BUILD"},       {'i', "INST"},
                   {'o', "OBJ"},            {'\x81', "NEWOBJ"},    {'\x92', "NEWOBJ_EX"},
                   {'\x82', "EXT1"},        {'\x83', "EXT2"},      {'\x84', "EXT4"},
                   {'P', "PERSID"},         {'Q', "BINPERSID"},    {'\x97', "NEXT_BUFFER"},
                   {'\x98', "READONLY_BUFFER"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char buf[4] = {'\x80', '\x04', refused[i].op, '.'};
        char want[64];
        snprintf(want, sizeof want, "opcode %s at offset 2", refused[i].name);
        ck_assert_int_eq(decode_err(buf, 4, &d), MS_EUNSUPPORTED);
        ck_assert_msg(strstr(d.msg, want) != NULL, "%s: %s", refused[i].name, d.msg);
    }
    /* A byte that is no opcode at all. */
    ck_assert_int_eq(decode_err("\x80\x04\xff.", 4, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "0xff at offset 2"));
}
END_TEST

START_TEST(stack_errors)
{
    ms_diag d = {0};
    ck_assert_int_eq(decode_err("\x80\x02" "a.", 4, &d), MS_EPARSE); /* APPEND on nothing */
    ck_assert_ptr_nonnull(strstr(d.msg, "stack underflow"));
    ck_assert_ptr_nonnull(strstr(d.msg, "APPEND at offset 2"));
    /* SETITEM on a list: EMPTY_LIST, K 1, K 2, SETITEM at offset 7. */
    static const char s[] = "\x80\x02]K\x01K\x02s.";
    ck_assert_int_eq(decode_err(s, LEN(s), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "SETITEM at offset 7"));
    /* A list as a dict key: unhashable, as in Python. */
    static const char u[] = "\x80\x02}]K\x01s.";
    ck_assert_int_eq(decode_err(u, LEN(u), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "unhashable list"));
    /* MARK, NONE, POP_MARK, STOP: nothing left to return. */
    ck_assert_int_eq(decode_err("\x80\x02(N1.", 6, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "STOP at offset 5"));
    /* TUPLE with no MARK. */
    ck_assert_int_eq(decode_err("\x80\x02Nt.", 5, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "TUPLE at offset 3"));
    /* POP with nothing above a MARK drops the MARK (Python's load_pop). */
    ms_pickle *p = decode_ok("\x80\x02(0K\x05.", 7);
    ck_assert_int_eq(int_of(ms_pickle_root(p)), 5);
    ms_pickle_free(p);
    /* A frame longer than the input. */
    static const char f[] = "\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00N.";
    ck_assert_int_eq(decode_err(f, LEN(f), &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "FRAME at offset 2"));
}
END_TEST

START_TEST(limits)
{
    ms_pickle_limits lim;
    ms_pickle_limits_default(&lim);
    lim.max_depth = 4;
    ms_pickle *p = NULL;
    ms_diag d = {0};
    /* The fifth MARK (offset 6) exceeds a depth of 4. */
    ck_assert_int_eq(ms_pickle_decode("\x80\x02(((((", 7, &lim, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "MARK at offset 6"));
    /* Tuples nested 5 deep: ((((((),),),),),) */
    ck_assert_int_eq(ms_pickle_decode("\x80\x02)\x85\x85\x85\x85.", 8, &lim, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "TUPLE1 at offset 6"));
    ms_pickle_limits_default(&lim);
    lim.max_values = 3;
    ck_assert_int_eq(ms_pickle_decode("\x80\x02(NNNNt.", 9, &lim, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "NONE at offset 6"));
    ck_assert_ptr_null(p);
    ms_pickle_limits_default(&lim);
    lim.max_stack = 2;
    ck_assert_int_eq(ms_pickle_decode("\x80\x02NNN.", 6, &lim, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "NONE at offset 4"));
}
END_TEST

/* Two chains A_i = (A_i-1, A_i-1) and B_i = (B_i-1, B_i-1) of distinct
 * but equal tuples: comparing A_40 with B_40 as dict keys visits 2^40
 * pairs (Python too).  The decoder stops at its comparison budget. */
START_TEST(key_comparison_bounded)
{
    unsigned char buf[512];
    size_t o = 0;
    buf[o++] = 0x80;
    buf[o++] = 4;
    for (int i = 0; i < 2; i++) { /* memo 0: A_0 = 1, memo 1: B_0 = 1 */
        buf[o++] = 'K';
        buf[o++] = 1;
        buf[o++] = 0x94;
    }
    unsigned a = 0, b = 1, next = 2;
    for (int i = 0; i < 40; i++) {
        unsigned prev[2] = {a, b};
        for (int k = 0; k < 2; k++) { /* BINGET x, BINGET x, TUPLE2, MEMOIZE */
            buf[o++] = 'h';
            buf[o++] = (unsigned char)prev[k];
            buf[o++] = 'h';
            buf[o++] = (unsigned char)prev[k];
            buf[o++] = 0x86;
            buf[o++] = 0x94;
        }
        a = next;
        b = next + 1;
        next += 2;
    }
    const unsigned char tail[] = {'}', '(', 'h', (unsigned char)a, 'K', 1,
                                  'h', (unsigned char)b, 'K', 2, 'u', '.'};
    memcpy(buf + o, tail, sizeof tail);
    o += sizeof tail;
    ms_pickle *p = NULL;
    ms_diag d = {0};
    char want[64];
    snprintf(want, sizeof want, "SETITEMS at offset %zu", o - 2);
    ck_assert_int_eq(ms_pickle_decode(buf, o, NULL, &p, &d), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "comparisons"));
    ck_assert_msg(strstr(d.msg, want) != NULL, "%s", d.msg);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(trailing_bytes_ignored)
{
    /* As pickle.loads: everything after STOP is not read. */
    ms_pickle *p = decode_ok("\x80\x02K\x03.garbage", 12);
    ck_assert_int_eq(int_of(ms_pickle_root(p)), 3);
    ms_pickle_free(p);
    ck_assert_int_eq(ms_pickle_free(NULL), MS_EINVAL);
    ck_assert_int_eq(ms_pickle_decode(NULL, 3, NULL, &p, NULL), MS_EINVAL);
}
END_TEST

static Suite *pickle_suite(void)
{
    Suite *s = suite_create("pickle");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, dict_of_list_protocol4);
    tcase_add_test(tc, memo_shares_objects);
    tcase_add_test(tc, memo_text_and_long_forms);
    tcase_add_test(tc, bad_memo_index);
    tcase_add_test(tc, protocol5_kinds);
    tcase_add_test(tc, integer_forms);
    tcase_add_test(tc, text_string_and_float);
    tcase_add_test(tc, dict_duplicate_keys);
    tcase_add_test(tc, big_dict_lookup);
    tcase_add_test(tc, truncated_everywhere);
    tcase_add_test(tc, wrong_protocol);
    tcase_add_test(tc, not_a_pickle);
    tcase_add_test(tc, code_opcodes_refused);
    tcase_add_test(tc, stack_errors);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, key_comparison_bounded);
    tcase_add_test(tc, trailing_bytes_ignored);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pickle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
