//! Giving memory back. The relocation table: the dynamic loader reads the
//! executable's relocation table (`.rela.dyn`, ~0.7 MB: one entry per pointer in the
//! binary's static data) once, before `main`, and never again; it is file-backed, so
//! dropping it from the page tables costs nothing but a re-read from the page cache if
//! anything ever looked again. Each of a session's three processes would otherwise keep it
//! resident all day (bench/RESULTS.md, 2026-11-30).
//!
//! The same holds for any read-only data a passing piece of work read: the TUI's syntax
//! highlighter reads a 0.4 MB syntax dump and Oniguruma's Unicode tables while it is
//! loaded, and they would stay resident after it is dropped. [`ReadOnlyData`] notes which
//! pages were resident before such work and releases those it added.

/// Drops the executable's relocation table from this process's resident memory (Linux
/// only; elsewhere, or when the table cannot be found, nothing happens). Returns the bytes
/// released. Call it once `main` runs: relocation is over by then.
pub fn release_relocation_table() -> usize {
    #[cfg(target_os = "linux")]
    {
        linux::release()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Returns the heap's free memory to the kernel (glibc keeps what was freed, per thread
/// arena, for reuse): for a process that just dropped a large structure and will idle.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only gives free pages back; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Which pages of the executable's read-only data (`.rodata` and its neighbours) were
/// resident when it was made.
#[derive(Debug)]
pub struct ReadOnlyData {
    #[cfg(target_os = "linux")]
    before: linux::Resident,
}

impl ReadOnlyData {
    /// Notes the pages resident now; `None` where that cannot be known (not Linux, no
    /// /proc).
    pub fn resident_now() -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            linux::Resident::now().map(|before| Self { before })
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Drops from resident memory the pages resident now that were not when `self` was
    /// made (a later read faults them back in from the page cache). Returns the bytes
    /// released.
    pub fn release_added(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.before.release_added()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::c_int;

    const DT_NULL: i64 = 0;
    const DT_RELA: i64 = 7;
    const DT_RELASZ: i64 = 8;

    /// An entry of the dynamic section (`Elf64_Dyn`).
    #[repr(C)]
    struct Dyn {
        tag: i64,
        value: u64,
    }

    /// The main program as the loader mapped it: its load address and program headers.
    struct Program {
        base: usize,
        headers: Vec<libc::Elf64_Phdr>,
    }

    fn main_program() -> Option<Program> {
        let mut found: Option<Program> = None;
        // SAFETY: the callback only copies the program headers the loader hands it, and
        // stops after the first object (the main program).
        unsafe {
            libc::dl_iterate_phdr(Some(visit), (&raw mut found).cast());
        }
        found
    }

    pub(super) fn release() -> usize {
        let Some(program) = main_program() else { return 0 };
        let Some((start, length)) = relocation_table(&program) else { return 0 };
        let page = page_size();
        // Only whole pages inside the table: its neighbours (.dynsym, .rodata) stay.
        let first = start.div_ceil(page) * page;
        let end = (start + length) / page * page;
        if end <= first {
            return 0;
        }
        // SAFETY: [first, end) lies inside a read-only file-backed mapping of the
        // executable that nothing wrote; MADV_DONTNEED only drops its page-table entries,
        // and a later read faults the same bytes back in from the file.
        if unsafe { drop_pages(first, end - first) } { end - first } else { 0 }
    }

    /// MADV_DONTNEED on `[start, start + length)`; whether it was done.
    ///
    /// # Safety
    /// The range must lie inside a read-only, file-backed, never-written mapping: its
    /// bytes then come back unchanged from the file on the next read.
    unsafe fn drop_pages(start: usize, length: usize) -> bool {
        // SAFETY: as the caller promises.
        unsafe { libc::madvise(start as *mut libc::c_void, length, libc::MADV_DONTNEED) == 0 }
    }

    /// Which pages of the main program's read-only data segment were resident.
    #[derive(Debug)]
    pub(super) struct Resident {
        start: usize,
        pages: Vec<bool>,
    }

    impl Resident {
        pub(super) fn now() -> Option<Self> {
            let program = main_program()?;
            let page = page_size();
            // The largest segment that is neither writable nor executable: .rodata and
            // its neighbours (never the relocated, copied-on-write RELRO data).
            let segment = program
                .headers
                .iter()
                .filter(|header| {
                    header.p_type == libc::PT_LOAD
                        && header.p_flags & (libc::PF_W | libc::PF_X) == 0
                })
                .max_by_key(|header| header.p_filesz)?;
            let start = (program.base + segment.p_vaddr as usize).div_ceil(page) * page;
            let end = (program.base + (segment.p_vaddr + segment.p_filesz) as usize) / page * page;
            let pages = resident_pages(start, end.checked_sub(start)? / page, page)?;
            Some(Self { start, pages })
        }

        pub(super) fn release_added(&self) -> usize {
            let page = page_size();
            let Some(now) = resident_pages(self.start, self.pages.len(), page) else { return 0 };
            let mut released = 0;
            let mut index = 0;
            while index < now.len() {
                if !now[index] || self.pages[index] {
                    index += 1;
                    continue;
                }
                let run = now[index..]
                    .iter()
                    .zip(&self.pages[index..])
                    .take_while(|(now, before)| **now && !**before)
                    .count();
                // SAFETY: the run lies inside the executable's read-only, non-executable,
                // file-backed segment, which nothing can have written.
                if unsafe { drop_pages(self.start + index * page, run * page) } {
                    released += run * page;
                }
                index += run;
            }
            released
        }
    }

    /// For each of `count` pages from `start`, whether it is mapped in this process from
    /// the file (/proc/self/pagemap: bit 63 present, bit 61 file page). A page copied on
    /// write (a text relocation, a debugger's breakpoint) is not: dropping it would bring
    /// back the file's bytes.
    fn resident_pages(start: usize, count: usize, page: usize) -> Option<Vec<bool>> {
        use std::os::unix::fs::FileExt;
        let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
        let mut entries = vec![0u8; count * 8];
        pagemap.read_exact_at(&mut entries, (start / page * 8) as u64).ok()?;
        const FILE_PAGE: u64 = 1 << 63 | 1 << 61;
        let entry = |bytes: &[u8]| bytes.try_into().map(u64::from_ne_bytes).unwrap_or(0);
        Some(entries.chunks_exact(8).map(|bytes| entry(bytes) & FILE_PAGE == FILE_PAGE).collect())
    }

    fn page_size() -> usize {
        // SAFETY: sysconf has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).ok().filter(|size| *size > 0).unwrap_or(4096)
    }

    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info for the duration of the call, and `data`
        // is the `Option<Program>` that `main_program` passed.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Option<Program>>()) };
        // SAFETY: as above: `dlpi_phdr` points to `dlpi_phnum` program headers.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        *found = Some(Program { base: info.dlpi_addr as usize, headers: headers.to_vec() });
        1 // the first object is the main program: stop
    }

    /// The main program's relocation table as (start, length), if found inside one of its
    /// read-only, file-backed segments.
    fn relocation_table(program: &Program) -> Option<(usize, usize)> {
        let Program { base, headers } = program;
        let base = *base;
        let dynamic = headers.iter().find(|header| header.p_type == libc::PT_DYNAMIC)?;
        let mut entry = (base + dynamic.p_vaddr as usize) as *const Dyn;
        let (mut address, mut length) = (None, None);
        for _ in 0..(dynamic.p_memsz as usize / size_of::<Dyn>()) {
            // SAFETY: the entries lie inside the PT_DYNAMIC segment the loader mapped.
            let Dyn { tag, value } = unsafe { entry.read() };
            match tag {
                DT_NULL => break,
                DT_RELA => address = Some(value as usize),
                DT_RELASZ => length = Some(value as usize),
                _ => {}
            }
            // SAFETY: still inside the segment (bounded by the loop count).
            entry = unsafe { entry.add(1) };
        }
        let (address, length) = (address?, length?);
        // glibc rewrites some dynamic entries to run-time addresses; others keep the
        // link-time one.
        let start = if address >= base { address } else { base + address };
        let inside_read_only_segment = headers.iter().any(|header| {
            let segment = base + header.p_vaddr as usize;
            header.p_type == libc::PT_LOAD
                && header.p_flags & libc::PF_W == 0
                && start >= segment
                && start + length <= segment + header.p_filesz as usize
        });
        inside_read_only_segment.then_some((start, length))
    }
}

#[cfg(test)]
mod tests {
    use super::{ReadOnlyData, release_relocation_table};

    /// 1 MB of read-only data nothing else reads (not zero, so it is not in .bss).
    static TABLE: [u64; 131_072] = {
        let mut table = [0u64; 131_072];
        let mut index = 0;
        while index < table.len() {
            table[index] = (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            index += 1;
        }
        table
    };

    fn sum_table() -> u64 {
        std::hint::black_box(&TABLE).iter().fold(0, |sum, value| sum.wrapping_add(*value))
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn read_only_data_read_since_a_note_is_released_and_reads_the_same_after() {
        let before = ReadOnlyData::resident_now().expect("/proc/self/pagemap readable");
        let sum = sum_table();
        let released = before.release_added();
        // Most of the table's 256 pages were read after the note (a few may have been
        // mapped with neighbours another test read).
        assert!(released >= 200 * 4096, "released {released} bytes");
        assert_eq!(released % 4096, 0);
        assert_eq!(sum_table(), sum, "the same bytes, faulted back from the file");
        // What is resident now was read again after the note: released again.
        assert!(before.release_added() >= 200 * 4096);
        // Read before a fresh note: then nothing of it is released.
        sum_table();
        let after = ReadOnlyData::resident_now().unwrap();
        sum_table();
        assert!(after.release_added() < 128 * 4096, "not the table again");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_relocation_table_of_this_test_binary_is_released_and_the_process_goes_on() {
        // A PIE test binary has a relocation table of several pages.
        let released = release_relocation_table();
        assert!(released > 0, "nothing released");
        assert_eq!(released % 4096, 0);
        // Formatting and allocation (which relocated data backs) still work.
        let text = format!("{:?}", vec![1, 2, 3]);
        assert_eq!(text, "[1, 2, 3]");
        // A second call finds the same table and releases it again, harmlessly.
        assert_eq!(release_relocation_table(), released);
    }
}
