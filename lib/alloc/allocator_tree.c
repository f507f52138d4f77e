/* Intrusive red-black tree for the allocator's ordered block sets.
 * The classic algorithm (Cormen et al., ch. 13) with NULL leaves, written
 * once for both directions: dir 0 is left, 1 is right, and each mirrored
 * case is the same code with the direction flipped. */
#include "allocator_tree.h"

#include "allocator_internal.h"

static bool is_red(const ms_anode *n)
{
    return n && n->red;
}

/* The link that points at n: its parent's child slot, or the root. */
static ms_anode **link_of(ms_atree *t, const ms_anode *n)
{
    ms_anode *p = n->parent;
    return p ? &p->child[p->child[1] == n] : &t->root;
}

/* Rotate x down towards dir: its child on the other side takes its place
 * (dir 0: rotate left). */
static void rotate(ms_atree *t, ms_anode *x, int dir)
{
    ms_anode *y = x->child[!dir];
    ms_anode *inner = y->child[dir];
    x->child[!dir] = inner;
    if (inner)
        inner->parent = x;
    *link_of(t, x) = y;
    y->parent = x->parent;
    y->child[dir] = x;
    x->parent = y;
}

static void insert_fixup(ms_atree *t, ms_anode *z)
{
    ms_anode *p;
    while ((p = z->parent) && p->red) {
        ms_anode *g = p->parent; /* a red node is never the root */
        int side = g->child[1] == p;
        ms_anode *u = g->child[!side];
        if (is_red(u)) {
            p->red = 0;
            u->red = 0;
            g->red = 1;
            z = g;
            continue;
        }
        if (z == p->child[!side]) {
            rotate(t, p, side);
            p = z;
        }
        p->red = 0;
        g->red = 1;
        rotate(t, g, !side);
        break;
    }
    t->root->red = 0;
}

void alloc_tree_insert(ms_atree *t, ms_anode *n)
{
    uint64_t hi = n->hi, lo = alloc_node_lo(n);
    ms_anode *parent = NULL;
    ms_anode **link = &t->root;
    while (*link) {
        parent = *link;
        link = &parent->child[!alloc_tree_key_before(hi, lo, parent)];
    }
    n->parent = parent;
    n->child[0] = n->child[1] = NULL;
    n->red = 1;
    *link = n;
    t->count++;
    if (parent && parent->red)
        insert_fixup(t, n);
    else if (!parent)
        n->red = 0;
}

/* v (possibly NULL) takes u's place under u's parent. */
static void transplant(ms_atree *t, ms_anode *u, ms_anode *v)
{
    *link_of(t, u) = v;
    if (v)
        v->parent = u->parent;
}

static ms_anode *extreme(ms_anode *n, int dir)
{
    while (n->child[dir])
        n = n->child[dir];
    return n;
}

/* x may be NULL (a black leaf); xp is its parent.  x's side is found from
 * its sibling, which a black-height deficit guarantees exists. */
static void erase_fixup(ms_atree *t, ms_anode *x, ms_anode *xp)
{
    while (x != t->root && !is_red(x)) {
        int side = xp->child[0] != x;
        ms_anode *w = xp->child[!side];
        if (w->red) {
            w->red = 0;
            xp->red = 1;
            rotate(t, xp, side);
            w = xp->child[!side];
        }
        if (!is_red(w->child[0]) && !is_red(w->child[1])) {
            w->red = 1;
            x = xp;
            xp = x->parent;
            continue;
        }
        if (!is_red(w->child[!side])) {
            w->child[side]->red = 0;
            w->red = 1;
            rotate(t, w, !side);
            w = xp->child[!side];
        }
        w->red = xp->red;
        xp->red = 0;
        if (w->child[!side])
            w->child[!side]->red = 0;
        rotate(t, xp, side);
        x = t->root;
        break;
    }
    if (x)
        x->red = 0;
}

void alloc_tree_erase(ms_atree *t, ms_anode *z)
{
    ms_anode *x;
    ms_anode *xp;
    uint32_t removed_red = z->red;
    if (!z->child[0] || !z->child[1]) {
        x = z->child[0] ? z->child[0] : z->child[1];
        xp = z->parent;
        transplant(t, z, x);
    } else {
        ms_anode *y = extreme(z->child[1], 0);
        removed_red = y->red;
        x = y->child[1];
        if (y->parent == z) {
            xp = y;
        } else {
            xp = y->parent;
            transplant(t, y, x);
            y->child[1] = z->child[1];
            y->child[1]->parent = y;
        }
        transplant(t, z, y);
        y->child[0] = z->child[0];
        y->child[0]->parent = y;
        y->red = z->red;
    }
    if (!removed_red && t->root)
        erase_fixup(t, x, xp);
    z->child[0] = z->child[1] = z->parent = NULL;
    t->count--;
}

void alloc_tree_replace(ms_atree *t, ms_anode *old, ms_anode *nw)
{
    *link_of(t, old) = nw;
    nw->parent = old->parent;
    nw->red = old->red;
    for (int d = 0; d < 2; d++) {
        nw->child[d] = old->child[d];
        if (nw->child[d])
            nw->child[d]->parent = nw;
    }
    old->child[0] = old->child[1] = old->parent = NULL;
}

ms_anode *alloc_tree_first(const ms_atree *t)
{
    return t->root ? extreme(t->root, 0) : NULL;
}

ms_anode *alloc_tree_last(const ms_atree *t)
{
    return t->root ? extreme(t->root, 1) : NULL;
}

/* In-order step towards dir (1: next, 0: previous). */
static ms_anode *step(const ms_anode *n, int dir)
{
    if (n->child[dir])
        return extreme(n->child[dir], !dir);
    const ms_anode *p = n->parent;
    while (p && n == p->child[dir]) {
        n = p;
        p = p->parent;
    }
    return (ms_anode *)p;
}

ms_anode *alloc_tree_next(const ms_anode *n)
{
    return step(n, 1);
}

ms_anode *alloc_tree_prev(const ms_anode *n)
{
    return step(n, 0);
}
