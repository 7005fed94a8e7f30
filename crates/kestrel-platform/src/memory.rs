//! Giving memory back. The relocation table: the dynamic loader reads the
//! executable's relocation table (`.rela.dyn`, ~0.7 MB: one entry per pointer in the
//! binary's static data) once, before `main`, and never again; it is file-backed, so
//! dropping it from the page tables costs nothing but a re-read from the page cache if
//! anything ever looked again. Each of a session's three processes would otherwise keep it
//! resident all day (bench/RESULTS.md, 2026-11-30).

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

    /// The main program's relocation table as (start, length), if found inside one of its
    /// read-only, file-backed segments.
    #[derive(Default)]
    struct Found {
        range: Option<(usize, usize)>,
    }

    pub(super) fn release() -> usize {
        let mut found = Found::default();
        // SAFETY: the callback only reads the program headers and the dynamic section the
        // loader hands it, and stops after the first object (the main program).
        unsafe {
            libc::dl_iterate_phdr(Some(visit), (&raw mut found).cast());
        }
        let Some((start, length)) = found.range else {
            return 0;
        };
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
        let done =
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED) };
        if done == 0 { end - first } else { 0 }
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
        // is the `Found` that `release` passed.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
        // SAFETY: as above: `dlpi_phdr` points to `dlpi_phnum` program headers.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let base = info.dlpi_addr as usize;
        found.range = relocation_table(base, headers);
        1 // the first object is the main program: stop
    }

    fn relocation_table(base: usize, headers: &[libc::Elf64_Phdr]) -> Option<(usize, usize)> {
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
    use super::release_relocation_table;

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
