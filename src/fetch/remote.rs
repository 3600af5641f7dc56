//! Where each dataset is published and what its files must be: the canonical URLs with their
//! sizes and SHA-256 sums as TensorFlow Datasets records them (`tensorflow_datasets/
//! url_checksums/{mnist,fashion_mnist,cifar10}.txt`).

use dp_data::DatasetName;
use dp_engine::error::{EngineError, Result};

/// One published file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteFile {
    /// Its name, at the end of the URL and on disk.
    pub name: &'static str,
    /// Bytes.
    pub size: u64,
    /// Hex SHA-256.
    pub sha256: &'static str,
}

/// Where a dataset's files are published.
#[derive(Debug, Clone, Copy)]
pub struct RemoteDataset {
    /// The folder it is kept in under the cache's `datasets/` (the name users type).
    pub folder: &'static str,
    /// The URL the file names are appended to.
    pub base: &'static str,
    /// The files.
    pub files: &'static [RemoteFile],
    /// True when the one file is a tar.gz of CIFAR-10's binary batches, to be unpacked.
    pub archive: bool,
}

const MNIST: &[RemoteFile] = &[
    RemoteFile {
        name: "train-images-idx3-ubyte.gz",
        size: 9_912_422,
        sha256: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    },
    RemoteFile {
        name: "train-labels-idx1-ubyte.gz",
        size: 28_881,
        sha256: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    },
    RemoteFile {
        name: "t10k-images-idx3-ubyte.gz",
        size: 1_648_877,
        sha256: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    },
    RemoteFile {
        name: "t10k-labels-idx1-ubyte.gz",
        size: 4_542,
        sha256: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
];

const FASHION_MNIST: &[RemoteFile] = &[
    RemoteFile {
        name: "train-images-idx3-ubyte.gz",
        size: 26_421_880,
        sha256: "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    },
    RemoteFile {
        name: "train-labels-idx1-ubyte.gz",
        size: 29_515,
        sha256: "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    },
    RemoteFile {
        name: "t10k-images-idx3-ubyte.gz",
        size: 4_422_102,
        sha256: "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    },
    RemoteFile {
        name: "t10k-labels-idx1-ubyte.gz",
        size: 5_148,
        sha256: "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
    },
];

const CIFAR10: &[RemoteFile] = &[RemoteFile {
    name: "cifar-10-binary.tar.gz",
    size: 170_052_171,
    sha256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
}];

/// Where `name` is published; refused for a user's own data, which is never fetched.
pub fn remote(name: DatasetName) -> Result<RemoteDataset> {
    Ok(match name {
        DatasetName::Mnist => RemoteDataset {
            folder: "mnist",
            base: "https://storage.googleapis.com/cvdf-datasets/mnist",
            files: MNIST,
            archive: false,
        },
        DatasetName::FashionMnist => RemoteDataset {
            folder: "fashion-mnist",
            base: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com",
            files: FASHION_MNIST,
            archive: false,
        },
        DatasetName::Cifar10 => {
            RemoteDataset { folder: "cifar10", base: "https://www.cs.toronto.edu/~kriz", files: CIFAR10, archive: true }
        }
        DatasetName::ImageFolder | DatasetName::Csv => return Err(own_data(name)),
    })
}

/// The refusal to look for a user's own data anywhere but the folder they give.
pub fn own_data(name: DatasetName) -> EngineError {
    let (flag, layout) = match name {
        DatasetName::Csv => ("csv", "train.csv, and test.csv or --validation N"),
        _ => ("image-folder", "train/CLASS/*.png or .jpg, and test/CLASS/... or --validation N"),
    };
    EngineError::invalid(
        "data dir",
        format!("{flag} is the user's own data, read from --data-dir DIR only (DIR holds {layout})"),
    )
}
