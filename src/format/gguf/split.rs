//! A split GGUF (GGUF.md, "Split models"): gguf-split's parts
//! `NAME-00001-of-0000M.gguf` … `NAME-0000M-of-0000M.gguf`, each a complete
//! GGUF with its own header and data section, opened from the first part
//! as one model. Each part's `split.no` and `split.count` are checked.

use std::path::Path;

use crate::format::{Checkpoint, LoadError, StoredFile};

/// `(split.no, split.count)` of a part, when it says it is one of several.
fn split_of(file: &StoredFile) -> Option<(u64, u64)> {
    let g = file.gguf()?;
    let count = g.unsigned("split.count")?;
    (count > 1).then(|| (g.unsigned("split.no").unwrap_or(u64::MAX), count))
}

/// The name's stem and part count: `NAME-00001-of-00003.gguf` gives
/// `("NAME", 3)`.
fn parse_name(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(no) && digits(count)).then_some((prefix, count.parse().ok()?))
}

fn invalid(path: &Path, message: String) -> LoadError {
    LoadError::Gguf {
        path: path.to_path_buf(),
        error: crate::format::gguf::header::GgufError::Invalid(message),
    }
}

/// `first` (opened from `path`, a local file or a URL) as the model it is
/// the first part of; `Err((first, None))` when it is no split model's
/// first part (it is then opened alone). The other parts are opened by
/// `open_part`, given their file name.
pub(crate) fn open(
    path: &Path,
    first: StoredFile,
    open_part: &(dyn Fn(&str) -> Result<StoredFile, LoadError> + Sync),
) -> Result<Checkpoint, (StoredFile, Option<LoadError>)> {
    let Some((0, count)) = split_of(&first) else {
        return Err((first, None));
    };
    // The file name (a URL's last segment, without its query).
    let text = path.to_string_lossy();
    let name = text
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let Some((prefix, named)) = parse_name(&name).map(|(p, n)| (p.to_owned(), n)) else {
        let e = invalid(
            path,
            format!(
                "the file is the first of {count} parts (split.count), but its name is not NAME-00001-of-{count:05}.gguf, so its other parts cannot be found"
            ),
        );
        return Err((first, Some(e)));
    };
    if named != count {
        let e = invalid(
            path,
            format!("split.count is {count}, but the file name says {named} parts"),
        );
        return Err((first, Some(e)));
    }
    let mut shards = vec![(name, first)];
    for k in 2..=count {
        let part = format!("{prefix}-{k:05}-of-{count:05}.gguf");
        let file = open_part(&part).map_err(|e| match e {
            LoadError::Io { path, source } => LoadError::ShardMissing {
                shard: part.clone(),
                path,
                source,
            },
            other => other,
        });
        let file = match file {
            Ok(f) => f,
            Err(e) => return Err((shards.swap_remove(0).1, Some(e))),
        };
        if split_of(&file) != Some((k - 1, count)) {
            let e = invalid(
                file.path(),
                format!(
                    "part {part:?} does not say it is part {} of {count} (split.no, split.count)",
                    k - 1
                ),
            );
            return Err((shards.swap_remove(0).1, Some(e)));
        }
        shards.push((part, file));
    }
    Ok(Checkpoint::of_parts(
        path.to_path_buf(),
        shards,
        |shard, tensor, _first| {
            format!(
                "{shard:?} also holds tensor {tensor:?}; the first part's is the one read by name"
            )
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_name;

    #[test]
    fn part_names_give_their_stem_and_count() {
        assert_eq!(parse_name("m-00001-of-00003.gguf"), Some(("m", 3)));
        assert_eq!(parse_name("a-b-00001-of-00012.gguf"), Some(("a-b", 12)));
        assert_eq!(parse_name("m-1-of-3.gguf"), None);
        assert_eq!(parse_name("m.gguf"), None);
    }
}
