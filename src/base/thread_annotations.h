// Clang's thread-safety attributes (-Wthread-safety), empty under other compilers: the lock
// that guards a member (GUARDED_BY) and the locks a function needs held or not held
// (REQUIRES / EXCLUDES) are written where the compiler checks them, not only in comments.
// `make thread-safety` (scripts/check-thread-safety.sh) runs the analysis. Use with
// base/mutex.h (std::mutex carries no attributes in libstdc++).
#pragma once

#if defined(__clang__)
#define MX_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define MX_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) MX_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY MX_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) MX_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) MX_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) MX_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) MX_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) MX_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) MX_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS MX_THREAD_ANNOTATION(no_thread_safety_analysis)
