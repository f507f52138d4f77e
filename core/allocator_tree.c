/* Intrusive red-black tree for the allocator's ordered block sets.
 * The classic algorithm (Cormen et al., ch. 13) with NULL leaves. */
#include "allocator_tree.h"

#include "allocator_internal.h"

static uint64_t addr_of(const ms_anode *n)
{
    return ((const ms_ablock *)n)->addr; /* the node is the block's first member */
}

/* Branch-free: the direction taken at each node is data-dependent and
 * unpredictable, so setcc beats a mispredicted jump. */
static int key_less(uint64_t ahi, uint64_t alo, uint64_t bhi, uint64_t blo)
{
    return (ahi < bhi) | ((ahi == bhi) & (alo < blo));
}

static void rotate_left(ms_atree *t, ms_anode *x)
{
    ms_anode *y = x->right;
    x->right = y->left;
    if (y->left)
        y->left->parent = x;
    y->parent = x->parent;
    if (!x->parent)
        t->root = y;
    else if (x == x->parent->left)
        x->parent->left = y;
    else
        x->parent->right = y;
    y->left = x;
    x->parent = y;
}

static void rotate_right(ms_atree *t, ms_anode *x)
{
    ms_anode *y = x->left;
    x->left = y->right;
    if (y->right)
        y->right->parent = x;
    y->parent = x->parent;
    if (!x->parent)
        t->root = y;
    else if (x == x->parent->right)
        x->parent->right = y;
    else
        x->parent->left = y;
    y->right = x;
    x->parent = y;
}

static void insert_fixup(ms_atree *t, ms_anode *z)
{
    while (z->parent && z->parent->red) {
        ms_anode *p = z->parent;
        ms_anode *g = p->parent;
        if (p == g->left) {
            ms_anode *u = g->right;
            if (u && u->red) {
                p->red = 0;
                u->red = 0;
                g->red = 1;
                z = g;
                continue;
            }
            if (z == p->right) {
                z = p;
                rotate_left(t, z);
                p = z->parent;
            }
            p->red = 0;
            g->red = 1;
            rotate_right(t, g);
        } else {
            ms_anode *u = g->left;
            if (u && u->red) {
                p->red = 0;
                u->red = 0;
                g->red = 1;
                z = g;
                continue;
            }
            if (z == p->left) {
                z = p;
                rotate_right(t, z);
                p = z->parent;
            }
            p->red = 0;
            g->red = 1;
            rotate_left(t, g);
        }
    }
    t->root->red = 0;
}

void ms_atree_insert(ms_atree *t, ms_anode *n)
{
    uint64_t hi = n->hi, lo = addr_of(n);
    ms_anode *parent = NULL;
    ms_anode **link = &t->root;
    while (*link) {
        parent = *link;
        link = key_less(hi, lo, parent->hi, addr_of(parent)) ? &parent->left : &parent->right;
    }
    n->parent = parent;
    n->left = n->right = NULL;
    n->red = 1;
    *link = n;
    insert_fixup(t, n);
    t->count++;
}

static void transplant(ms_atree *t, ms_anode *u, ms_anode *v)
{
    if (!u->parent)
        t->root = v;
    else if (u == u->parent->left)
        u->parent->left = v;
    else
        u->parent->right = v;
    if (v)
        v->parent = u->parent;
}

static ms_anode *min_node(ms_anode *n)
{
    while (n->left)
        n = n->left;
    return n;
}

static ms_anode *max_node(ms_anode *n)
{
    while (n->right)
        n = n->right;
    return n;
}

/* x may be NULL (a black leaf); xp is its parent. */
static void erase_fixup(ms_atree *t, ms_anode *x, ms_anode *xp)
{
    while (x != t->root && (!x || !x->red)) {
        if (x == xp->left) {
            ms_anode *w = xp->right;
            if (w->red) {
                w->red = 0;
                xp->red = 1;
                rotate_left(t, xp);
                w = xp->right;
            }
            if ((!w->left || !w->left->red) && (!w->right || !w->right->red)) {
                w->red = 1;
                x = xp;
                xp = x->parent;
                continue;
            }
            if (!w->right || !w->right->red) {
                w->left->red = 0;
                w->red = 1;
                rotate_right(t, w);
                w = xp->right;
            }
            w->red = xp->red;
            xp->red = 0;
            if (w->right)
                w->right->red = 0;
            rotate_left(t, xp);
            x = t->root;
            break;
        }
        ms_anode *w = xp->left;
        if (w->red) {
            w->red = 0;
            xp->red = 1;
            rotate_right(t, xp);
            w = xp->left;
        }
        if ((!w->left || !w->left->red) && (!w->right || !w->right->red)) {
            w->red = 1;
            x = xp;
            xp = x->parent;
            continue;
        }
        if (!w->left || !w->left->red) {
            w->right->red = 0;
            w->red = 1;
            rotate_left(t, w);
            w = xp->left;
        }
        w->red = xp->red;
        xp->red = 0;
        if (w->left)
            w->left->red = 0;
        rotate_right(t, xp);
        x = t->root;
        break;
    }
    if (x)
        x->red = 0;
}

void ms_atree_erase(ms_atree *t, ms_anode *z)
{
    ms_anode *x;
    ms_anode *xp;
    int removed_red = z->red;
    if (!z->left) {
        x = z->right;
        xp = z->parent;
        transplant(t, z, z->right);
    } else if (!z->right) {
        x = z->left;
        xp = z->parent;
        transplant(t, z, z->left);
    } else {
        ms_anode *y = min_node(z->right);
        removed_red = y->red;
        x = y->right;
        if (y->parent == z) {
            xp = y;
        } else {
            xp = y->parent;
            transplant(t, y, y->right);
            y->right = z->right;
            y->right->parent = y;
        }
        transplant(t, z, y);
        y->left = z->left;
        y->left->parent = y;
        y->red = z->red;
    }
    if (!removed_red && t->root)
        erase_fixup(t, x, xp);
    z->left = z->right = z->parent = NULL;
    t->count--;
}

ms_anode *ms_atree_lower_bound(const ms_atree *t, uint64_t hi, uint64_t addr)
{
    ms_anode *n = t->root;
    ms_anode *best = NULL;
    while (n) {
        if (key_less(n->hi, addr_of(n), hi, addr)) {
            n = n->right;
        } else {
            best = n;
            n = n->left;
        }
    }
    return best;
}

ms_anode *ms_atree_first(const ms_atree *t)
{
    return t->root ? min_node(t->root) : NULL;
}

ms_anode *ms_atree_last(const ms_atree *t)
{
    return t->root ? max_node(t->root) : NULL;
}

ms_anode *ms_atree_next(const ms_anode *n)
{
    if (n->right)
        return min_node(n->right);
    const ms_anode *p = n->parent;
    while (p && n == p->right) {
        n = p;
        p = p->parent;
    }
    return (ms_anode *)p;
}

ms_anode *ms_atree_prev(const ms_anode *n)
{
    if (n->left)
        return max_node(n->left);
    const ms_anode *p = n->parent;
    while (p && n == p->left) {
        n = p;
        p = p->parent;
    }
    return (ms_anode *)p;
}
