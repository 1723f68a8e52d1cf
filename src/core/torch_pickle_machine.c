/*
 * torch_pickle_machine.c
 *		The pickle machine proper: the pickle's bytes (in memory, or read
 *		from the file through a window), the stack, its marks and the memo,
 *		and the loop over the opcodes that a state dict needs; any other
 *		opcode is refused where it is met.  What GLOBAL, REDUCE and
 *		BINPERSID build is torch_pickle_globals.c's and
 *		torch_pickle_tensors.c's.  No postgres.h.
 */
#include "torch_pickle_internal.h"

#include <string.h>

static const char *const opnames[256] = {
	['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
	['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
	['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID",
	['R'] = "REDUCE", ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING",
	['V'] = "UNICODE", ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD",
	['c'] = "GLOBAL", ['d'] = "DICT", ['}'] = "EMPTY_DICT", ['e'] = "APPENDS",
	['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST", ['j'] = "LONG_BINGET",
	['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT", ['q'] = "BINPUT",
	['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE", [')'] = "EMPTY_TUPLE",
	['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES", ['C'] = "SHORT_BINBYTES",
	[0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4",
	[0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE",
	[0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE",
	[0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8", [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS",
	[0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX", [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE",
	[0x95] = "FRAME", [0x96] = "BYTEARRAY8", [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

static const char *
opname(unsigned char op)
{
	return opnames[op] ? opnames[op] : "an unknown opcode";
}

/* Append item to a tuple, list or dict (a key or a value). */
static bool
seq_push(Vm *vm, Obj *o, Obj *item)
{
	if (o->u.seq.n == o->u.seq.cap)
	{
		uint32_t	cap = o->u.seq.cap ? o->u.seq.cap * 2 : 8;
		Obj		  **v;

		/* the budget stops any sequence long before this */
		if (o->u.seq.cap >= UINT32_MAX / 4)
			return tf_pickle_fail(vm, "a list or dict of the pickle is too long");
		v = tf_pickle_vm_alloc(vm, sizeof(Obj *) * cap);
		if (v == NULL)
			return false;
		if (o->u.seq.n)
			memcpy(v, o->u.seq.v, sizeof(Obj *) * o->u.seq.n);
		o->u.seq.v = v;
		o->u.seq.cap = cap;
	}
	o->u.seq.v[o->u.seq.n++] = item;
	return true;
}

/* A tuple of the n objects at items (copied: items may be the stack). */
static Obj *
new_tuple(Vm *vm, Obj *const *items, size_t n)
{
	Obj		   *o = tf_pickle_new_obj(vm, O_TUPLE);

	if (o == NULL)
		return NULL;
	if (n > 0)
	{
		o->u.seq.v = tf_pickle_vm_alloc(vm, sizeof(Obj *) * n);
		if (o->u.seq.v == NULL)
			return NULL;
		memcpy(o->u.seq.v, items, sizeof(Obj *) * n);
	}
	o->u.seq.n = o->u.seq.cap = (uint32_t) n;
	return o;
}

/* ---- the input ---- */

/* Copy the next n bytes of the pickle to dst (op at byte at wants them). */
static bool
take(Vm *vm, void *dst, uint64_t n, unsigned char op, uint64_t at)
{
	Src		   *s = &vm->src;
	unsigned char *d = dst;

	if (n > s->end - s->pos)
	{
		if (s->capped)
			return tf_pickle_fail(vm, "the pickle is longer than %zu MB", TF_TORCH_MAX_PICKLE >> 20);
		return tf_pickle_fail(vm, "the pickle ends inside %s at byte %llu", opname(op), (unsigned long long) at);
	}
	while (n > 0)
	{
		uint64_t	chunk;

		if (s->pos >= s->start && s->pos - s->start < s->len)
		{
			chunk = s->start + s->len - s->pos;
			if (chunk > n)
				chunk = n;
			memcpy(d, s->buf + (s->pos - s->start), (size_t) chunk);
		}
		else if (s->read == NULL)
			return tf_pickle_fail(vm, "the pickle ends inside %s at byte %llu", opname(op), (unsigned long long) at);
		else if (n >= WINDOW / 2)
		{
			/* a long string: straight from the file */
			chunk = n;
			if (s->read(s->ctx, s->pos, d, (size_t) chunk) != 0)
				return tf_pickle_fail(vm, "cannot read the pickle at byte %llu", (unsigned long long) s->pos);
		}
		else
		{
			uint64_t	w = s->end - s->pos;

			if (w > WINDOW)
				w = WINDOW;
			if (s->read(s->ctx, s->pos, s->window, (size_t) w) != 0)
				return tf_pickle_fail(vm, "cannot read the pickle at byte %llu", (unsigned long long) s->pos);
			s->buf = s->window;
			s->start = s->pos;
			s->len = (size_t) w;
			continue;
		}
		d += chunk;
		s->pos += chunk;
		n -= chunk;
	}
	return true;
}

/* A line (GLOBAL's module or name, INT's digits) without its newline. */
static bool
take_line(Vm *vm, char *line, size_t *len, unsigned char op, uint64_t at)
{
	*len = 0;
	for (;;)
	{
		unsigned char c;

		if (!take(vm, &c, 1, op, at))
			return false;
		if (c == '\n')
			break;
		if (*len == MAX_LINE)
			return tf_pickle_fail(vm, "%s at byte %llu has a line longer than %d bytes", opname(op),
						(unsigned long long) at, MAX_LINE);
		line[(*len)++] = (char) c;
	}
	line[*len] = '\0';
	return true;
}

/* ---- the stack and the memo ---- */

static bool
push(Vm *vm, Obj *o)
{
	if (o == NULL)
		return false;
	if (vm->sp == vm->stack_cap)
	{
		size_t		cap = vm->stack_cap * 2;
		Obj		  **s;

		if (cap > MAX_STACK)
			return tf_pickle_fail(vm, "the pickle's stack grows beyond %zu objects", MAX_STACK);
		s = tf_pickle_vm_alloc(vm, sizeof(Obj *) * cap);
		if (s == NULL)
			return false;
		memcpy(s, vm->stack, sizeof(Obj *) * vm->sp);
		vm->stack = s;
		vm->stack_cap = cap;
	}
	vm->stack[vm->sp++] = o;
	return true;
}

/* the bottom of the stack above the last MARK */
static size_t
base(const Vm *vm)
{
	return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
}

static Obj *
pop(Vm *vm, unsigned char op, uint64_t at)
{
	if (vm->sp <= base(vm))
	{
		tf_pickle_fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
		return NULL;
	}
	return vm->stack[--vm->sp];
}

static Obj *
top(Vm *vm, unsigned char op, uint64_t at)
{
	if (vm->sp <= base(vm))
	{
		tf_pickle_fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
		return NULL;
	}
	return vm->stack[vm->sp - 1];
}

/* The objects above the last MARK, which is removed (with them). */
static bool
pop_mark(Vm *vm, Obj ***items, size_t *n, unsigned char op, uint64_t at)
{
	size_t		b;

	if (vm->nmarks == 0)
		return tf_pickle_fail(vm, "%s at byte %llu has no MARK before it", opname(op), (unsigned long long) at);
	b = vm->marks[--vm->nmarks];
	*items = vm->stack + b;
	*n = vm->sp - b;
	vm->sp = b;
	return true;
}

static bool
memo_put(Vm *vm, uint64_t idx, unsigned char op, uint64_t at)
{
	Obj		   *o = top(vm, op, at);

	if (o == NULL)
		return false;
	if (idx >= MAX_MEMO)
		return tf_pickle_fail(vm, "%s at byte %llu uses memo entry %llu, beyond %llu", opname(op),
					(unsigned long long) at, (unsigned long long) idx, (unsigned long long) MAX_MEMO);
	if (idx >= vm->memo_cap)
	{
		uint64_t	cap = vm->memo_cap * 2;
		Obj		  **m;

		if (cap <= idx)
			cap = idx + 1;
		if (cap > MAX_MEMO)
			cap = MAX_MEMO;
		m = tf_pickle_vm_alloc(vm, sizeof(Obj *) * (size_t) cap);
		if (m == NULL)
			return false;
		memcpy(m, vm->memo, sizeof(Obj *) * (size_t) vm->memo_cap);
		vm->memo = m;
		vm->memo_cap = cap;
	}
	/* MEMOIZE stores at len(memo), Python's count of entries */
	if (vm->memo[idx] == NULL)
		vm->memo_count++;
	vm->memo[idx] = o;
	return true;
}

static bool
memo_get(Vm *vm, uint64_t idx, unsigned char op, uint64_t at)
{
	if (idx >= vm->memo_cap || vm->memo[idx] == NULL)
		return tf_pickle_fail(vm, "%s at byte %llu reads memo entry %llu, which was never set", opname(op),
					(unsigned long long) at, (unsigned long long) idx);
	return push(vm, vm->memo[idx]);
}

/* ---- the machine ---- */

/*
 * Run one pickle from vm->src.pos to its STOP: the object it leaves, or
 * NULL with the message set.  The memo and the stack are the pickle's own;
 * storages are the file's.
 */
Obj *
tf_pickle_run(Vm *vm)
{
	vm->stack_cap = 64;
	vm->stack = tf_pickle_vm_alloc(vm, sizeof(Obj *) * vm->stack_cap);
	vm->sp = 0;
	vm->nmarks = 0;
	vm->memo_cap = 64;
	vm->memo = tf_pickle_vm_alloc(vm, sizeof(Obj *) * vm->memo_cap);
	vm->memo_count = 0;
	if (vm->stack == NULL || vm->memo == NULL)
		return NULL;
	for (size_t ops = 0;; ops++)
	{
		uint64_t	at = vm->src.pos;
		unsigned char op,
					b[8];
		Obj		   *o,
				   *k,
				   *x;
		Obj		  **items = NULL;
		size_t		n = 0;
		uint64_t	len;
		char		line[MAX_LINE + 1],
					line2[MAX_LINE + 1];
		size_t		llen,
					llen2;

		SPM_CHECK_INTERRUPTS(ops);
		if (vm->src.pos >= vm->src.end)
		{
			if (vm->src.capped)
				tf_pickle_fail(vm, "the pickle is longer than %zu MB", TF_TORCH_MAX_PICKLE >> 20);
			else
				tf_pickle_fail(vm, "the pickle ends at byte %llu without STOP", (unsigned long long) at);
			return NULL;
		}
		if (!take(vm, &op, 1, 0, at))
			return NULL;
		switch (op)
		{
			case 0x80:			/* PROTO */
				if (!take(vm, b, 1, op, at))
					return NULL;
				if (b[0] > 5)
				{
					tf_pickle_fail(vm, "the pickle has protocol %d, beyond Python's 5", b[0]);
					return NULL;
				}
				break;
			case 0x95:			/* FRAME: a length we need not use */
				if (!take(vm, b, 8, op, at))
					return NULL;
				if (le64(b) > vm->src.end - vm->src.pos)
				{
					tf_pickle_fail(vm, "FRAME at byte %llu is longer than the pickle", (unsigned long long) at);
					return NULL;
				}
				break;
			case '.':			/* STOP */
				if ((o = pop(vm, op, at)) == NULL)
					return NULL;
				if (vm->sp != 0 || vm->nmarks != 0)
				{
					tf_pickle_fail(vm, "the pickle stops at byte %llu with %zu more objects or marks on its stack",
						 (unsigned long long) at, vm->sp + (size_t) vm->nmarks);
					return NULL;
				}
				return o;
			case '(':			/* MARK */
				if (vm->nmarks == MAX_MARKS)
				{
					tf_pickle_fail(vm, "the pickle nests deeper than %d at byte %llu", MAX_MARKS, (unsigned long long) at);
					return NULL;
				}
				vm->marks[vm->nmarks++] = vm->sp;
				break;
			case '}':			/* EMPTY_DICT */
				if (!push(vm, tf_pickle_new_obj(vm, O_DICT)))
					return NULL;
				break;
			case ']':			/* EMPTY_LIST */
				if (!push(vm, tf_pickle_new_obj(vm, O_LIST)))
					return NULL;
				break;
			case ')':			/* EMPTY_TUPLE */
				if (!push(vm, new_tuple(vm, NULL, 0)))
					return NULL;
				break;
			case 't':			/* TUPLE */
				if (!pop_mark(vm, &items, &n, op, at) || !push(vm, new_tuple(vm, items, n)))
					return NULL;
				break;
			case 0x85:			/* TUPLE1 */
			case 0x86:			/* TUPLE2 */
			case 0x87:			/* TUPLE3 */
				n = (size_t) (op - 0x84);
				if (vm->sp - base(vm) < n)
				{
					tf_pickle_fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
					return NULL;
				}
				vm->sp -= n;
				if (!push(vm, new_tuple(vm, vm->stack + vm->sp, n)))
					return NULL;
				break;
			case 'X':			/* BINUNICODE */
			case 0x8c:			/* SHORT_BINUNICODE */
			case 0x8d:			/* BINUNICODE8 */
			case 'T':			/* BINSTRING (Python 2's str) */
			case 'U':			/* SHORT_BINSTRING */
				if (op == 0x8c || op == 'U')
				{
					if (!take(vm, b, 1, op, at))
						return NULL;
					len = b[0];
				}
				else if (op == 0x8d)
				{
					if (!take(vm, b, 8, op, at))
						return NULL;
					len = le64(b);
				}
				else
				{
					if (!take(vm, b, 4, op, at))
						return NULL;
					len = le32(b);
					if (op == 'T' && len > INT32_MAX)
					{
						tf_pickle_fail(vm, "BINSTRING at byte %llu has a negative length", (unsigned long long) at);
						return NULL;
					}
				}
				if (len > MAX_STRING)
				{
					tf_pickle_fail(vm, "%s at byte %llu has a string of %llu bytes, more than %llu", opname(op),
						 (unsigned long long) at, (unsigned long long) len, (unsigned long long) MAX_STRING);
					return NULL;
				}
				if (len > vm->src.end - vm->src.pos)
				{
					take(vm, b, len, op, at);	/* the message */
					return NULL;
				}
				if ((o = tf_pickle_new_obj(vm, O_STR)) == NULL || (o->u.str.s = tf_pickle_vm_alloc(vm, (size_t) len + 1)) == NULL ||
					!take(vm, o->u.str.s, len, op, at))
					return NULL;
				o->u.str.len = (size_t) len;
				if (!push(vm, o))
					return NULL;
				break;
			case 'J':			/* BININT */
			case 'K':			/* BININT1 */
			case 'M':			/* BININT2 */
				n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
				memset(b, 0, sizeof(b));
				if (!take(vm, b, n, op, at) || (o = tf_pickle_new_obj(vm, O_INT)) == NULL)
					return NULL;
				o->u.i = op == 'J' ? (int64_t) (int32_t) le32(b) : (int64_t) (b[0] | (b[1] << 8));
				if (!push(vm, o))
					return NULL;
				break;
			case 0x8a:			/* LONG1: little-endian two's complement */
				{
					unsigned char big[255];

					if (!take(vm, b, 1, op, at))
						return NULL;
					n = b[0];
					if (!take(vm, big, n, op, at))
						return NULL;
					if (n <= 8)
					{
						uint64_t	u = 0;

						if ((o = tf_pickle_new_obj(vm, O_INT)) == NULL)
							return NULL;
						for (size_t j = n; j-- > 0;)
							u = (u << 8) | big[j];
						if (n > 0 && n < 8 && (big[n - 1] & 0x80))
							u |= ~(uint64_t) 0 << (8 * n);
						o->u.i = (int64_t) u;
					}
					else
					{
						if ((o = tf_pickle_new_obj(vm, O_BIGINT)) == NULL || (o->u.str.s = tf_pickle_vm_alloc(vm, n + 1)) == NULL)
							return NULL;
						memcpy(o->u.str.s, big, n);
						o->u.str.len = n;
					}
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'I':			/* INT: protocol 0 and 1 (and bools as 00, 01) */
				{
					uint64_t	u = 0;
					size_t		j = 0;
					bool		neg = false;

					if (!take_line(vm, line, &llen, op, at))
						return NULL;
					if (llen == 2 && line[0] == '0' && (line[1] == '0' || line[1] == '1'))
					{
						if (!push(vm, line[1] == '1' ? vm->yes : vm->no))
							return NULL;
						break;
					}
					if (j < llen && (line[j] == '-' || line[j] == '+'))
						neg = line[j++] == '-';
					if (j == llen)
						u = UINT64_MAX;
					for (; j < llen && u <= (uint64_t) INT64_MAX; j++)
					{
						if (line[j] < '0' || line[j] > '9' || u > (uint64_t) INT64_MAX / 10)
							u = UINT64_MAX;
						else
							u = u * 10 + (uint64_t) (line[j] - '0');
					}
					if (u > (uint64_t) INT64_MAX)
					{
						tf_pickle_fail(vm, "INT at byte %llu is not an integer of 64 bits", (unsigned long long) at);
						return NULL;
					}
					if ((o = tf_pickle_new_obj(vm, O_INT)) == NULL)
						return NULL;
					o->u.i = neg ? -(int64_t) u : (int64_t) u;
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'G':			/* BINFLOAT: big-endian */
				{
					uint64_t	u = 0;

					if (!take(vm, b, 8, op, at) || (o = tf_pickle_new_obj(vm, O_FLOAT)) == NULL)
						return NULL;
					for (int j = 0; j < 8; j++)
						u = (u << 8) | b[j];
					memcpy(&o->u.f, &u, sizeof(double));
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'N':			/* NONE */
				if (!push(vm, vm->none))
					return NULL;
				break;
			case 0x88:			/* NEWTRUE */
			case 0x89:			/* NEWFALSE */
				if (!push(vm, op == 0x88 ? vm->yes : vm->no))
					return NULL;
				break;
			case 'q':			/* BINPUT */
				if (!take(vm, b, 1, op, at) || !memo_put(vm, b[0], op, at))
					return NULL;
				break;
			case 'r':			/* LONG_BINPUT */
				if (!take(vm, b, 4, op, at) || !memo_put(vm, le32(b), op, at))
					return NULL;
				break;
			case 0x94:			/* MEMOIZE */
				if (!memo_put(vm, vm->memo_count, op, at))
					return NULL;
				break;
			case 'h':			/* BINGET */
				if (!take(vm, b, 1, op, at) || !memo_get(vm, b[0], op, at))
					return NULL;
				break;
			case 'j':			/* LONG_BINGET */
				if (!take(vm, b, 4, op, at) || !memo_get(vm, le32(b), op, at))
					return NULL;
				break;
			case 'c':			/* GLOBAL: "module\nname\n" */
				if (!take_line(vm, line, &llen, op, at) || !take_line(vm, line2, &llen2, op, at) ||
					!push(vm, tf_pickle_find_global(vm, line, llen, line2, llen2)))
					return NULL;
				break;
			case 0x93:			/* STACK_GLOBAL: module and name on the stack */
				if ((k = pop(vm, op, at)) == NULL || (o = pop(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_STR || k->type != O_STR)
				{
					tf_pickle_fail(vm, "STACK_GLOBAL at byte %llu has operands that are not strings", (unsigned long long) at);
					return NULL;
				}
				if (!push(vm, tf_pickle_find_global(vm, o->u.str.s, o->u.str.len, k->u.str.s, k->u.str.len)))
					return NULL;
				break;
			case 'R':			/* REDUCE */
				if ((x = pop(vm, op, at)) == NULL || (o = pop(vm, op, at)) == NULL ||
					!push(vm, tf_pickle_reduce(vm, o, x, at)))
					return NULL;
				break;
			case 'b':			/* BUILD: an OrderedDict's _metadata, ignored */
				if ((x = pop(vm, op, at)) == NULL || (o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT)
				{
					tf_pickle_fail(vm, "BUILD at byte %llu sets the state of %s; only an OrderedDict's is expected",
						 (unsigned long long) at, tf_pickle_type_names[o->type]);
					return NULL;
				}
				break;
			case 's':			/* SETITEM */
				if ((x = pop(vm, op, at)) == NULL || (k = pop(vm, op, at)) == NULL ||
					(o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT)
				{
					tf_pickle_fail(vm, "SETITEM at byte %llu stores into %s, not a dict", (unsigned long long) at,
						 tf_pickle_type_names[o->type]);
					return NULL;
				}
				if (!seq_push(vm, o, k) || !seq_push(vm, o, x))
					return NULL;
				break;
			case 'u':			/* SETITEMS */
				if (!pop_mark(vm, &items, &n, op, at) || (o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT || n % 2 != 0)
				{
					tf_pickle_fail(vm, "SETITEMS at byte %llu stores %zu objects into %s (pairs into a dict expected)",
						 (unsigned long long) at, n, tf_pickle_type_names[o->type]);
					return NULL;
				}
				for (size_t j = 0; j < n; j++)
					if (!seq_push(vm, o, items[j]))
						return NULL;
				break;
			case 'a':			/* APPEND */
			case 'e':			/* APPENDS */
				if (op == 'a')
				{
					if ((x = pop(vm, op, at)) == NULL)
						return NULL;
					items = &x;
					n = 1;
				}
				else if (!pop_mark(vm, &items, &n, op, at))
					return NULL;
				if ((o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_LIST)
				{
					tf_pickle_fail(vm, "%s at byte %llu appends to %s, not a list", opname(op),
						 (unsigned long long) at, tf_pickle_type_names[o->type]);
					return NULL;
				}
				for (size_t j = 0; j < n; j++)
					if (!seq_push(vm, o, items[j]))
						return NULL;
				break;
			case 'Q':			/* BINPERSID */
				if ((o = pop(vm, op, at)) == NULL || !push(vm, tf_pickle_persistent_load(vm, o, at)))
					return NULL;
				break;
			default:
				if (opnames[op])
					tf_pickle_fail(vm, "pickle opcode %s (0x%02x) at byte %llu is not allowed in a state dict; refused",
						 opnames[op], op, (unsigned long long) at);
				else
					tf_pickle_fail(vm, "unknown pickle opcode 0x%02x at byte %llu", op, (unsigned long long) at);
				return NULL;
		}
	}
}

/* The pickle in memory. */
void
tf_pickle_src_mem(Vm *vm, const unsigned char *p, size_t len)
{
	memset(&vm->src, 0, sizeof(Src));
	vm->src.buf = p;
	vm->src.len = len;
	vm->src.end = len;
}
